"""Job files: one job (datasets, branches, settings, storage) described in TOML (driver).

``pydistcp run JOB.toml`` loads a job with ``load_job`` and runs it through
``distcp.copy``, the same path as ``pydistcp copy``; ``distcp.jobschema`` writes
the format as a JSON Schema (docs/job.schema.json). The keys come from the copy
command's options (distcp.jobs.keys), so the two cannot drift apart.
"""

from distcp.jobs.load import load_job
from distcp.jobs.model import Branch, Dataset, Job, StorageRule

__all__ = ["Branch", "Dataset", "Job", "StorageRule", "load_job"]
