"""The plan: a pure compile of (profile, options, host facts) into a step graph."""
