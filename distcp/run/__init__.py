"""DRIVER: the order of every run, written once, over a list of branches."""
