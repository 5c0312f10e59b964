"""Compiled kernels (flash-attn, TransformerEngine, any stage a profile marks `kernel:`).

A kernel stage takes the first source that has a wheel matching the env's build key: the lab
wheelhouse, then the prebuilt sources the profile declares, then a source build sized to the
host, whose wheel is published to the wheelhouse for the next env.
"""
