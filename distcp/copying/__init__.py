"""Stage 2: copy work units into staging, hashed and verified (executor).

Nothing here publishes or imports the planner or the commit stage: results
return to the driver as values (TaskResult).
"""
