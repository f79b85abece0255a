"""Quality checks: verdicts on a staged output before it may publish (driver and executor).

Gobblin's quality checkers, for one destination (one branch) per run today: a run's
``--check NAME[=ARG]`` list becomes a ``CheckList`` (a frozen value in TaskSpec) that
the executor runs on every output it stages. See ``base`` for writing a check.
"""

from distcp.quality.base import Inspector, QualityCheck, StagedOutput
from distcp.quality.checklist import CheckList, CheckSpec, check_list

__all__ = ["CheckList", "CheckSpec", "Inspector", "QualityCheck", "StagedOutput", "check_list"]
