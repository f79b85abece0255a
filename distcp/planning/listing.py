"""Find datasets, list origin and target, and plan; reads only (driver).

The only effect of this module is reading listings; everything it decides is
done by the pure functions of ``planning``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from distcp.configuration import CopyConfiguration
from distcp.datasets.base import CopyableDataset, DatasetHistory, DatasetListing
from distcp.errors import ConfigurationError, PlanningError
from distcp.model import FileStatus
from distcp.planning import beside
from distcp.planning.filesfrom import files_from_entries, files_from_list, list_flag
from distcp.planning.moving import check_max_move
from distcp.planning.plan import (
    DatasetPlan,
    Plan,
    check_duplicates,
    check_max_delete,
    expansion_targets,
    plan_dataset,
)
from distcp.planning.strategy import DRIVER_WALK, FILES_FROM, SPARK_LIST, Strategy
from distcp.registry import FINDERS
from distcp.state.layout import state_root_of
from distcp.state.store import DatasetState, StateStore
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.base import Tree

#: Lists a tree as ``Storage.walk`` does: ``(tree, links, skipped)`` -> ``(path,
#: FileStatus)`` pairs, in the walk's order (``distcp.spark.listing``).
Lister = Callable[[Tree, str, list[fsutil.Skipped]], Iterable[tuple[str, FileStatus]]]


@dataclass(frozen=True)
class Planned:
    plan: Plan
    datasets: tuple[CopyableDataset, ...]
    destination_listings: int = 0
    skipped: tuple[fsutil.Skipped, ...] = ()
    #: Rows the driver collected from planning on Spark (0: planned here).
    rows_collected: int = 0
    #: How each dataset was planned, and why (by URN, in the run's order).
    strategies: tuple[tuple[str, Strategy], ...] = ()


def find_datasets(cfg: CopyConfiguration) -> list[CopyableDataset]:
    finder = FINDERS.get(cfg.finder or ("glob" if cfg.dataset_glob else "single"))(cfg)
    datasets = list(finder.find())
    if cfg.delete and any(d.is_file for d in datasets):
        raise ConfigurationError(
            "--delete mirrors directories; a file source has nothing to mirror")
    return datasets


def target_listing(dataset: CopyableDataset, cfg: CopyConfiguration,
                   renamed: str | None = None,
                   lister: Lister | None = None) -> dict[str, FileStatus]:
    """What the destination already has under the dataset's destination root.

    ``renamed``: for a single converted file, the destination its converters give it
    (``x.gz`` -> ``x``, ``logs.tar`` -> ``logs/``), which is what a rerun must find.
    """
    url = renamed.rstrip("/") if renamed else dataset.destination_root
    found = target_root(dataset, cfg, url)
    if found is None:
        return {}
    tree, status = found
    if dataset.is_file:
        return {url: status}
    links = target_links(cfg)
    entries = lister(tree, links, []) if lister is not None \
        else tree.storage.walk(tree.url, links)
    if tree.storage.capabilities.local_paths:  # its own URL: 0.1 s per 100,000 entries
        return dict(entries)
    url_of = tree.url_of
    return {url_of(p): st for p, st in entries}


def keeps_mtimes(destination: str, cfg: CopyConfiguration) -> bool:
    """Whether the destination keeps the mtimes it is given (asked of its kind, no
    request sent): planning compares a preserved mtime only where it was kept."""
    return storage_for(destination, dict(cfg.dst_options)).capabilities.mtimes


def target_links(cfg: CopyConfiguration) -> str:
    """How the destination's links are listed: under ``--links copy`` as entries of their
    own (compared by their text, replaced as links), else followed."""
    return "copy" if cfg.links == "copy" else "follow"


def target_root(dataset: CopyableDataset, cfg: CopyConfiguration, url: str
                ) -> tuple[Tree, FileStatus] | None:
    """The tree at ``url`` on the destination and the status of what is there, None if
    nothing; a file where a directory tree would go is refused."""
    tree = storage_for(url, dict(cfg.dst_options)).tree(url)
    try:
        status = tree.storage.stat(tree.url)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PlanningError(f"cannot list destination {dataset.destination_root}: {exc}") from exc
    if not status.is_dir and not dataset.is_file:
        raise PlanningError(
            f"cannot copy directory {fsutil.display(dataset.root)} onto file "
            f"{fsutil.display(dataset.destination_root)}", path=dataset.destination_root)
    return tree, status


class JoinedPlanner(Protocol):
    """Plans a dataset from its listings joined on Spark, or two local trees walked side
    by side (``distcp.spark.planning``); None leaves it to the walk here."""

    def plans(self, ds: CopyableDataset, cfg: CopyConfiguration) -> bool: ...

    def __call__(self, ds: Any, cfg: CopyConfiguration) -> Any: ...


class FirstPlanner:
    """``plan_all``'s planner made of several: a dataset goes to the first that plans
    it and gives a plan (``--listing auto``: Spark's planning tasks for a big local
    tree, the driver's paired walks for a small one); None leaves it to the walk."""

    def __init__(self, *planners: JoinedPlanner) -> None:
        self.planners = planners

    def plans(self, ds: Any, cfg: CopyConfiguration) -> bool:
        return any(p.plans(ds, cfg) for p in self.planners)

    def __call__(self, ds: Any, cfg: CopyConfiguration) -> Any:
        for planner in self.planners:
            if planner.plans(ds, cfg):
                plan = planner(ds, cfg)
                if plan is not None:
                    return plan
        return None


def plan_all(cfg: CopyConfiguration, message: Callable[[str], None],
             datasets: list[CopyableDataset] | None = None,
             state: StateStore | None = None, lister: Lister | None = None,
             joined: JoinedPlanner | None = None) -> Planned:
    """List and plan every dataset of the run (found here unless given).

    ``lister`` lists trees in place of ``Storage.walk`` (``--listing spark``: on the
    executors); it must give what the walk gives. ``joined`` plans the datasets it
    takes from both listings joined on Spark, collecting only what is acted on.

    With ``--incremental`` (and a state store) the target is what the dataset's
    manifest says was published, so the destination is not listed at all.
    """
    datasets = find_datasets(cfg) if datasets is None else datasets
    datasets = [with_history(ds, state) for ds in datasets]
    tally = _Tally()
    for ds in datasets:
        message(f"listing {fsutil.display(ds.urn)}")
        done = joined(ds, cfg) if joined is not None and joined.plans(ds, cfg) else None
        if done is not None:
            tally.joined(ds, done)
            continue
        listing = source_listing(ds, cfg, lister)
        tally.strategies.append((ds.urn, listed_strategy(ds, cfg, lister)))
        tally.listed(listing)
        tally.plans.append(walked_plan(ds, cfg, listing, state, lister, tally))
        if tally.plans[-1].copy:
            beside.copies_ahead()
    if cfg.include and tally.seen and not tally.selected:
        raise PlanningError(f"--include {' '.join(cfg.include)}: no file matched, out of "
                            f"{tally.seen} file(s) in the source; check the patterns (a "
                            "pattern without '/' matches the file name)")
    check_duplicates(tally.plans, cfg.converter_options.expand_into_parent)
    if cfg.move:
        check_max_move(tally.plans, cfg.max_delete, cfg.compare)
    else:
        check_max_delete(tally.plans, cfg.max_delete)
    return Planned(Plan(tuple(tally.plans)), tuple(datasets), tally.listings,
                   tuple(tally.skipped), tally.collected, tuple(tally.strategies))


@dataclass
class _Tally:
    """What ``plan_all`` gathers dataset by dataset."""

    plans: list[DatasetPlan] = field(default_factory=list)
    skipped: list[fsutil.Skipped] = field(default_factory=list)
    strategies: list[tuple[str, Strategy]] = field(default_factory=list)
    listings: int = 0
    seen: int = 0
    selected: int = 0
    collected: int = 0

    def joined(self, ds: CopyableDataset, done: Any) -> None:
        """A dataset a joined planner planned (both trees listed, or the source and
        the manifest)."""
        self.plans.append(done.plan)
        self.skipped.extend(done.skipped)
        self.seen, self.listings = self.seen + done.seen, self.listings + done.listings
        self.collected += done.rows
        self.strategies.append((ds.urn, done.strategy))

    def listed(self, listing: DatasetListing) -> None:
        self.skipped.extend(listing.skipped)
        self.seen, self.selected = self.seen + listing.seen, self.selected + len(listing.files)


def walked_plan(ds: CopyableDataset, cfg: CopyConfiguration, listing: DatasetListing,
                state: StateStore | None, lister: Lister | None, tally: _Tally
                ) -> DatasetPlan:
    """The plan of a dataset from its source ``listing`` and its target: the manifest
    under ``--incremental`` (without ``--delete``), else the destination's listing
    (counted in ``tally``)."""
    # The manifest holds the sources' own mtimes; a listed object store, its own.
    mtimes_kept = True
    if cfg.incremental and state is not None and not cfg.delete:
        target = manifest_listing(state.load(ds.urn))
    else:
        mtimes_kept = keeps_mtimes(ds.destination_root, cfg)
        single = listing.files[0] if ds.is_file and listing.files else None
        renamed = single.destination if single is not None and single.converters else None
        known = ds.targets(cfg, listing.files)
        target = known if known is not None else target_listing(ds, cfg, renamed, lister)
        tally.listings += known is None
    if state is not None and any(f.destination.endswith("/") for f in listing.files):
        published = {entry[3] for entry in state.load(ds.urn).manifest.values()}
        target = expansion_targets(listing.files, target, published, ds.destination_root,
                                   listed=not (cfg.incremental and not cfg.delete))
    return plan_dataset(ds.urn, ds.destination_root, listing.files, listing.directories,
                        target, overwrite=cfg.overwrite,
                        delete=cfg.delete and ds.lists_everything,
                        compare=cfg.compare, mtimes_kept=mtimes_kept,
                        protected=_filtered_out(target, ds, cfg) if cfg.delete else (),
                        marks=listing.marks, order=listing.order,
                        announced=listing.announced, versions=listing.versions,
                        registrations=listing.registrations)


def listed_strategy(ds: CopyableDataset, cfg: CopyConfiguration,
                    lister: Lister | None) -> Strategy:
    """How ``plan_all`` listed a dataset it planned itself, and why."""
    flag = list_flag(cfg)
    if flag is not None:
        return Strategy(FILES_FROM, f"{flag} names the files; the tree is not walked")
    if ds.is_file:
        return Strategy(DRIVER_WALK, "a single file")
    on_spark = getattr(lister, "on_spark", None)
    if on_spark is None or not _takes_entries(ds):
        return Strategy(DRIVER_WALK, f"--listing {cfg.listing}" if on_spark is None
                        else f"a {type(ds).__name__} lists itself")
    tree = storage_for(ds.root, dict(cfg.src_options)).tree(ds.root)
    why = str(lister.reason(tree))  # type: ignore[union-attr]
    return Strategy(SPARK_LIST if on_spark(tree) else DRIVER_WALK, why)


def with_history(ds: CopyableDataset, state: StateStore | None) -> CopyableDataset:
    """The dataset given what earlier runs published, when it plans from that (a
    stream dataset: its watermarks and the destinations its manifest lists)."""
    if not ds.uses_history or state is None:
        return ds
    known = state.load(ds.urn)
    return ds.with_history(DatasetHistory(known.watermarks, frozenset(known.manifest)))


def source_listing(ds: CopyableDataset, cfg: CopyConfiguration,
                   lister: Lister | None = None) -> DatasetListing:
    """The dataset's listing: a walk of its tree (or ``lister``'s listing of it), or,
    with ``--files-from`` or ``--files-from-manifest``, the files the list names (the
    tree is not walked)."""
    if list_flag(cfg) is None:
        if lister is None or ds.is_file or not _takes_entries(ds):
            return ds.listing(cfg)

        def listed(tree: Tree, skipped: list[fsutil.Skipped]
                   ) -> Iterable[tuple[str, FileStatus]]:
            return lister(tree, cfg.links, skipped)

        return ds.listing_from(cfg, listed)

    def entries(tree: Tree, skipped: list[fsutil.Skipped]) -> Iterator[tuple[str, FileStatus]]:
        return files_from_entries(tree, files_from_list(cfg, tree.path), cfg, skipped)

    return ds.listing_from(cfg, entries)


def _takes_entries(ds: CopyableDataset) -> bool:
    """Whether the dataset can be listed from entries given to it (``listing_from``)."""
    return type(ds).listing_from is not CopyableDataset.listing_from


def _filtered_out(target: dict[str, FileStatus], ds: CopyableDataset,
                  cfg: CopyConfiguration) -> list[str]:
    """Destination files the run's filters leave out: --delete leaves them alone."""
    wanted = cfg.file_filter
    if ds.is_file or not wanted.active:
        return []
    root = ds.destination_root.rstrip("/")
    return [url for url, st in target.items() if not st.is_dir and url.startswith(root + "/")
            and not wanted.admits(url[len(root) + 1:], st)]


def manifest_listing(state: DatasetState) -> dict[str, FileStatus]:
    """The target as the state's manifest knows it: (size, origin mtime, digest)."""
    return {dest: FileStatus(dest, int(size), float(mtime)) for dest, (size, mtime, _d, _g)
            in state.manifest.items()}


def state_root(cfg: CopyConfiguration, datasets: Sequence[CopyableDataset]) -> str:
    """``--state-dir``, else ``<DST>/.pydistcp``; for a single-file copy, beside the file."""
    single = datasets[0].destination_root if len(datasets) == 1 and datasets[0].is_file \
        else None
    return state_root_of(cfg.destination, cfg.dst_options, cfg.state_dir, single)
