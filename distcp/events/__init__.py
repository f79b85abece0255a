"""Data-availability events as OpenLineage RunEvents, ``--events`` (driver).

A run sends START when it begins and COMPLETE or FAIL when it ends; each published
file set sends a COMPLETE of its own, from a commit step that follows the set's data,
so no event ever announces data that is not published. Each event carries an
idempotency key (the commit sequence id for a file set): a replayed commit sends the
same event with the same key, and a consumer recognises the repeat.
"""
