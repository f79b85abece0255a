"""The fork: one read of each source file, written to several branches (driver and executor).

Gobblin's ForkOperator (seed 000) made exact by the commit log: ``branches`` says what
a branch is, ``operators`` which branches receive a file, ``tee`` how one read feeds
them, ``task`` what an executor runs, ``agree`` the ``all`` policy and ``run`` the
driver. A run without ``--fork`` never imports this package.
"""
