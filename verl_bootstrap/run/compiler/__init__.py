"""The plan compiler: a profile and the host's facts into a Plan, each step described by its
step kind."""
