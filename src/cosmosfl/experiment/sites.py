"""Sites that bring their own data and models: site files, the shared public set U, the label set.

In the partition mode one dataset and a seed make every party's data. In the site mode
(`sites.public` set) each site reads its own labelled file and builds its own model from a
*site file* (or a Flower node config) that only it reads; what all parties share is the file U
(checked by its SHA-256) and the run's label set (class names, ids by position). The server
needs only U and the config: `build_sites_experiment(cfg, clients=[])` opens no site file.
docs/tutorials/organisations.md shows a deployment across organisations built on this.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cosmosfl.client import Client
from cosmosfl.data import Dataset, load_dataset
from cosmosfl.data.public import PublicSet, load_public
from cosmosfl.data.schema import label_order
from cosmosfl.data.sources import FILE_SPLIT_SEED, resolve_data_path
from cosmosfl.data.tabular import TABLE_SUFFIXES, read_site_table
from cosmosfl.experiment.errors import ConfigError
from cosmosfl.experiment.model_spec import ModelSpec, parse_models
from cosmosfl.experiment.private_clients import PRIVACY_KEYS, privatise_clients, site_settings
from cosmosfl.experiment.yamlio import load_yaml

if TYPE_CHECKING:
    from cosmosfl.experiment.config import ExperimentConfig
    from cosmosfl.experiment.parts import Experiment

SITE_KEYS = (
    "id",
    "data",
    "model",
    "public",
    "label_column",
    "label_map",
    "test_fraction",
    "missing",
    "image_size",
    "privacy",
)
# Node-config spellings (Flower's --node-config is `key=value` pairs, dashes by convention).
NODE_KEYS = {"site": "site", **{k.replace("_", "-"): k for k in SITE_KEYS}}


class SiteRefusedError(ConfigError):
    """A site cannot join this run (a different U, labels outside the label set, ...)."""


@dataclass(frozen=True)
class Site:
    """What one site brings: its private labelled file, its model, its copy of U."""

    data: Path
    model: ModelSpec
    public: Path | None = None  # None: the run config's sites.public
    id: int | None = None
    label_column: str | None = None
    label_map: dict[str, str] = field(default_factory=dict)  # its spelling -> the run's name
    test_fraction: float = 0.2
    missing: str = "refuse"
    image_size: int = 32
    # The site's own `privacy` settings (docs/privacy.md) over the run config's section.
    privacy: dict[str, Any] = field(default_factory=dict)
    where: str = "site"


def read_site_file(path: str | Path) -> Site:
    """A site file (YAML): `data`, `model`, optionally `public`, `id`, `label_column`,
    `label_map`, `test_fraction`, `missing`, `image_size`. Relative paths are relative to the
    site file's folder."""
    import yaml

    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"site file {str(path)!r} does not exist")
    try:
        raw = load_yaml(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"site file {path}: not valid YAML ({err})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"site file {path}: expected a mapping of {', '.join(SITE_KEYS)}")
    return site_from_mapping(raw, base=path.parent, where=f"site file {path}")


def site_from_node_config(node_config: Mapping[str, Any]) -> Site | None:
    """The site a Flower SuperNode serves: `site=<site file>` or the site keys inline
    (`data=... model=... public=...`); None when the node config names no site (the
    partition mode). A `partition-id` must agree with the site's `id`."""
    keys = {NODE_KEYS[k]: v for k, v in node_config.items() if k in NODE_KEYS}
    if not keys:
        return None
    if "site" in keys:
        if len(keys) > 1:
            raise ConfigError(
                f"node config: give either site=<file> or the site keys inline, not both "
                f"({sorted(keys)})"
            )
        site = read_site_file(str(keys["site"]))
    else:
        site = site_from_mapping(keys, base=Path.cwd(), where="node config")
    if "partition-id" in node_config:
        pid = int(node_config["partition-id"])
        if site.id is not None and site.id != pid:
            raise ConfigError(
                f"{site.where}: id {site.id} differs from the node's partition-id {pid}"
            )
        site = Site(**{**site.__dict__, "id": pid})
    return site


def site_from_mapping(raw: Mapping[str, Any], *, base: Path, where: str) -> Site:
    unknown = sorted(set(raw) - set(SITE_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {', '.join(SITE_KEYS)}")
    for key in ("data", "model"):
        if key not in raw:
            raise ConfigError(f"{where}: `{key}` is required (the site's {key} to use)")
    specs = parse_models([raw["model"]], f"{where}: model")
    label_map = raw.get("label_map") or {}
    if not isinstance(label_map, dict):
        raise ConfigError(f"{where}: label_map maps this site's label spellings to the run's")
    test_fraction = float(raw.get("test_fraction", 0.2))
    if not 0 < test_fraction < 1:
        raise ConfigError(f"{where}: test_fraction = {test_fraction} must lie in (0, 1)")
    site_id = raw.get("id")
    privacy = raw.get("privacy") or {}
    allowed = [k for k in PRIVACY_KEYS if k != "require_epsilon"]  # the run's, not a site's
    if not isinstance(privacy, dict) or set(privacy) - set(allowed):
        raise ConfigError(f"{where}: privacy takes a mapping of {', '.join(allowed)}")
    return Site(
        data=_path(raw["data"], base),
        model=specs[0],
        public=_path(raw["public"], base) if raw.get("public") else None,
        id=None if site_id is None else int(site_id),
        label_column=raw.get("label_column"),
        label_map={str(k): str(v) for k, v in label_map.items()},
        test_fraction=test_fraction,
        missing=str(raw.get("missing", "refuse")),
        image_size=int(raw.get("image_size", 32)),
        privacy=dict(privacy),
        where=where,
    )


def _path(value: Any, base: Path) -> Path:
    path = Path(str(value)).expanduser()
    return path if path.is_absolute() else base / path


# -- one site's client -------------------------------------------------------------------------
def site_dataset(site: Site, public: PublicSet, labels: tuple[str, ...]) -> Dataset:
    """The site's own file as a Dataset labelled with the run's label set: its labels (after
    `label_map`) are looked up by name, so a site missing classes or ordering them differently
    gets the same ids as every other; a label outside the set refuses the site."""
    where = f"site {site.id if site.id is not None else site.where} ({site.data})"
    arrays, own = _site_arrays(site, public, where, site.missing)
    names = [site.label_map.get(c, c) for c in own]
    merged = {n: [c for c, m in zip(own, names, strict=True) if m == n] for n in set(names)}
    merged = {n: cs for n, cs in merged.items() if len(cs) > 1}
    if merged:
        listed = "; ".join(f"{cs} -> {n!r}" for n, cs in sorted(merged.items()))
        raise SiteRefusedError(
            f"{where}: label_map sends several of this site's labels to one class ({listed}); "
            "map each label to its own class (or relabel the rows in the file if they really "
            "are one class)"
        )
    outside = sorted({n for n in names if n not in labels})
    if outside:
        raise SiteRefusedError(
            f"{where}: label(s) {outside} are not in the run's label set {list(labels)}; map "
            "this site's spellings with label_map in its site file, or drop those rows"
        )
    ids = np.array([labels.index(n) for n in names], dtype=np.int64)
    x_train = arrays["x_train"]
    if x_train.shape[1:] != public.raw.shape[1:]:
        raise SiteRefusedError(
            f"{where}: samples of shape {x_train.shape[1:]}, and U's are "
            f"{public.raw.shape[1:]}: a site's data must have U's features (or image size)"
        )
    return Dataset(
        name=site.data.stem,
        x_train=x_train,
        y_train=ids[arrays["y_train"]],
        x_test=arrays["x_test"],
        y_test=ids[arrays["y_test"]],
        classes=labels,
    )


def build_site_client(
    cfg: ExperimentConfig,
    site: Site,
    site_id: int,
    public: PublicSet,
    labels: tuple[str, ...],
    notes: list[str] | None = None,
) -> tuple[Client, str]:
    """(the site's client, its model name), seeded from the config's seed and the site id as
    a partition-mode client with that id is; under privacy (the site's settings over the
    run's) its learner behind its mechanism, what was chosen appended to `notes`."""
    from cosmosfl.experiment.client_builder import build_client

    site = Site(**{**site.__dict__, "id": site_id})
    privacy, refusal = site_settings(cfg, site.privacy, f"site {site_id} ({site.where})")
    if refusal is not None:
        raise SiteRefusedError(refusal)
    ds = site_dataset(site, public, labels)
    every = np.arange(len(ds.y_train)), np.arange(len(ds.y_test))
    client = build_client(cfg, site_id, site.model, ds, *every, public.prepare)
    client.public_x = public.x
    # Privacy plans the fits from the algorithm's epochs: the config's algorithm, never run.
    lines = privatise_clients(
        privacy, [client], public.x, cfg.algorithm.built, cfg.rounds, cfg.seed
    )
    if notes is not None:
        notes.extend(lines)
    return client, site.model.name


def site_labels(cfg: ExperimentConfig, sites: list[Site], public: PublicSet) -> tuple[str, ...]:
    """The run's label set: `sites.labels`, or (in-process only) every site's labels, sorted."""
    if cfg.sites.labels:
        return tuple(str(v) for v in cfg.sites.labels)
    found: set[str] = set()
    for site in sites:
        ds_classes = _own_labels(site, public)
        found |= {site.label_map.get(c, c) for c in ds_classes}
    return tuple(label_order(found))


def _own_labels(site: Site, public: PublicSet) -> tuple[str, ...]:
    where = f"site {site.id if site.id is not None else site.where} ({site.data})"
    return _site_arrays(site, public, where, "impute")[1]  # missing values: not refused here


def _site_arrays(
    site: Site, public: PublicSet, where: str, missing: str
) -> tuple[dict[str, np.ndarray], tuple[str, ...]]:
    """The site's own file as train/test arrays and its own label names (a table read with
    U's schema, anything else as `load_dataset` reads it)."""
    if site.data.name.lower().endswith(TABLE_SUFFIXES):
        if public.schema is None:
            raise SiteRefusedError(f"{where}: holds a table and the run's U is not one")
        arrays = read_site_table(
            site.data,
            public.schema,
            label_column=site.label_column,
            test_fraction=site.test_fraction,
            seed=FILE_SPLIT_SEED,
            missing=missing,
        )
        return arrays, arrays["classes"]
    ds = load_dataset(str(site.data), test_fraction=site.test_fraction, image_size=site.image_size)
    return {k: getattr(ds, k) for k in ("x_train", "y_train", "x_test", "y_test")}, ds.classes


def config_sites(cfg: ExperimentConfig) -> list[Site]:
    """The site files the config lists (in-process runs and `flower local`), id = position
    unless the file says otherwise."""
    sites = []
    for i, name in enumerate(cfg.sites.files):
        site = read_site_file(config_path(cfg, name))
        if site.id is not None and site.id != i:
            raise ConfigError(
                f"sites.files[{i}] ({name}) says id {site.id}; a site's id is its position in "
                "sites.files"
            )
        sites.append(Site(**{**site.__dict__, "id": i}))
    return sites


def run_public(cfg: ExperimentConfig, who: str = "the server") -> PublicSet:
    """U as the config names it (the server's copy), checked against `sites.public_sha256`."""
    s = cfg.sites
    assert s.public is not None
    return load_public(
        public_path(cfg),
        sha256=s.public_sha256,
        label_column=s.label_column,
        missing=cfg.data.missing,
        who=who,
        sep=cfg.data.sep,
        encoding=cfg.data.encoding,
    )


def build_sites_experiment(
    cfg: ExperimentConfig, clients: Collection[int] | None = None
) -> Experiment:
    """The site-mode experiment: U from `sites.public`, and the clients of `sites.files`
    (`clients`: only those ids; [] for a server that must open no site's file)."""
    from cosmosfl.experiment.parts import Experiment

    public = run_public(cfg)
    wanted = None if clients is None else set(clients)
    sites = config_sites(cfg) if (wanted is None or wanted) else []
    if sites and len(sites) != cfg.data.num_clients:
        raise ConfigError(
            f"sites.files lists {len(sites)} sites and data.num_clients is "
            f"{cfg.data.num_clients}; leave num_clients out (it follows the files)"
        )
    labels = site_labels(cfg, sites, public)
    built, names, notes = [], [], []
    for site in sites:
        assert site.id is not None
        if wanted is not None and site.id not in wanted:
            continue
        site = Site(**{**site.__dict__, "public": site.public or public_path(cfg)})
        own_public = (
            public
            if site.public == public_path(cfg)
            else load_public(
                site.public,
                sha256=public.sha256,
                label_column=cfg.sites.label_column,
                missing=cfg.data.missing,
                who=f"site {site.id}",
            )
        )
        client, name = build_site_client(cfg, site, site.id, own_public, labels, notes)
        built.append(client)
        names.append(name)
    # The run's copy, with the config's server models as they are (sites' photos: no flip).
    algorithm = cfg.algorithm.fresh(server_learner=cfg.server_models)
    return Experiment(
        cfg,
        None,
        None,
        built,
        public.x,
        algorithm,
        names,
        labels=labels,
        name="sites",
        privacy=notes,
    )


def public_path(cfg: ExperimentConfig) -> Path:
    assert cfg.sites.public is not None
    return config_path(cfg, cfg.sites.public)


def config_path(cfg: ExperimentConfig, name: str) -> Path:
    """A path the config names, looked up as `data.dataset` paths are (`resolve_data_path`):
    as given, else inside `data.data_dir` (or $COSMOSFL_DATA_DIR)."""
    return resolve_data_path(name, cfg.data.data_dir)


def shared_config(cfg: ExperimentConfig, *, keep_files: bool = False) -> ExperimentConfig:
    """The run config a deployment shares with every party: U's SHA-256 filled in from the
    coordinator's copy, the label set (from the listed site files when the config names
    none), and, unless `keep_files`, no site files (each node names its own)."""
    import dataclasses

    if cfg.sites.public is None:
        return cfg
    public = run_public(cfg, who="the coordinator")
    labels = cfg.sites.labels
    if not labels:
        if not cfg.sites.files:
            raise ConfigError(
                "sites.labels is required for a deployment (the class names, ids by position): "
                "every site maps its own labels onto it"
            )
        labels = list(site_labels(cfg, config_sites(cfg), public))
    sites = dataclasses.replace(
        cfg.sites,
        public_sha256=public.sha256,
        labels=[str(v) for v in labels],
        files=list(cfg.sites.files) if keep_files else [],
    )
    return dataclasses.replace(cfg, sites=sites)
