"""``pydistcp check``: compare a source with its copy, by listing and digest (driver and executor).

``compare`` pairs the two listings and decides what it can without reading (pure),
``digests`` reads files on the executors, ``report`` holds the outcome. A check is a
run of ``distcp.run.pipeline`` whose steps are ``distcp.run.check.CheckSteps``; the
digest job on Spark is ``distcp.spark.check``. The package is named ``checking`` because a
subpackage ``distcp/check/`` would replace the function ``distcp.check``.
"""
