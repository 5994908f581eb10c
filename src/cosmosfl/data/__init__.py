"""Data for federated experiments: datasets, partitions, augmentation and partition reports."""

from cosmosfl.data.augment import (
    Augmentation,
    CropFlip,
    default_augmentation,
    train_augmentation_for,
)
from cosmosfl.data.partition import (
    PARTITIONERS,
    Partition,
    PartitionError,
    dirichlet_split,
    iid_split,
    make_partition,
    paper_split,
    pathological_split,
)
from cosmosfl.data.report import (
    label_summary,
    label_table,
    plot_label_distribution,
    write_label_csv,
)
from cosmosfl.data.sources import (
    DATASET_NAMES,
    DatasetFormatError,
    DatasetNotFoundError,
    ImageDataset,
    channel_stats,
    load_dataset,
    prepare_images,
    subsample,
)

__all__ = [
    "DATASET_NAMES",
    "PARTITIONERS",
    "Augmentation",
    "CropFlip",
    "DatasetFormatError",
    "DatasetNotFoundError",
    "ImageDataset",
    "Partition",
    "PartitionError",
    "channel_stats",
    "default_augmentation",
    "dirichlet_split",
    "iid_split",
    "label_summary",
    "label_table",
    "load_dataset",
    "make_partition",
    "paper_split",
    "pathological_split",
    "plot_label_distribution",
    "prepare_images",
    "subsample",
    "train_augmentation_for",
    "write_label_csv",
]
