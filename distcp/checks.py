"""The old import path of quality checks, kept for plugins (driver and executor).

``distcp.checks`` became ``distcp.quality`` so that "check" names only the ``check``
command. A plugin written as ``from distcp.checks import QualityCheck`` keeps working
and is told once, with a DeprecationWarning, where the names live now.
"""

from __future__ import annotations

import warnings

from distcp.quality import (
    CheckList,
    CheckSpec,
    Inspector,
    QualityCheck,
    StagedOutput,
    check_list,
)

warnings.warn("distcp.checks is now distcp.quality; import QualityCheck from there",
              DeprecationWarning, stacklevel=2)

__all__ = ["CheckList", "CheckSpec", "Inspector", "QualityCheck", "StagedOutput", "check_list"]
