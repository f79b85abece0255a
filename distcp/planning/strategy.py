"""The name of a way a phase was done, and why it was chosen (driver).

A run plans each dataset one of several ways and copies one of several ways; which
one, and the fact that decided it, is shown by ``-v`` and kept in the summary
(``Summary.strategy``) so that an operator can tell what a run did without reading
its code: ``{"strategy": "spark-join", "why": "--listing auto: more than 100,000 keys"}``.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Ways to plan a dataset.
DRIVER_WALK = "driver-walk"              # listed and planned in this process
FILES_FROM = "files-from"                # a list names the files; no walk
SPARK_LIST = "spark-list"                # listed by Spark tasks, planned here
DRIVER_PAIRED_WALK = "driver-paired-walk"  # two local trees walked side by side here
SPARK_PAIRED_WALK = "spark-paired-walk"  # ... by Spark tasks, a subtree each
SPARK_JOIN = "spark-join"                # both listings joined on Spark
#: Ways to copy.
NOTHING = "nothing"                      # nothing to copy: no Spark job
COLLECTED = "collected"                  # work units on Spark, results to the driver
KEPT = "kept"                            # files and results stay on the executors
HERE = "here"                            # work units run in this process, no Spark job
KEPT_HERE = "kept-here"                  # kept files' chunks copied here, no Spark job
FORK = "fork"                            # one read into several destinations


@dataclass(frozen=True)
class Strategy:
    """A way of doing a phase, and the fact that chose it."""

    name: str
    why: str

    def to_dict(self) -> dict[str, str]:
        return {"strategy": self.name, "why": self.why}

    def besides(self, more: str) -> Strategy:
        return Strategy(self.name, f"{self.why}; {more}")
