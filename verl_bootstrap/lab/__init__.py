"""A lab's own steps: the same env on every node of a cluster (cluster/), and a newcomer's
onboarding (onboard/)."""
