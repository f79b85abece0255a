"""The order of every run, written once, over a list of branches (driver)."""
