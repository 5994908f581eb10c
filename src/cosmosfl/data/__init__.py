"""Data for federated experiments: datasets (images and feature vectors), partitions, neighbours
for r_B, and partition reports."""

from cosmosfl.data.augment import (
    Augmentation,
    CropFlip,
    FeatureNoise,
    Neighbours,
    default_augmentation,
    train_augmentation_for,
)
from cosmosfl.data.errors import DataError
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
from cosmosfl.data.prepare import (
    channel_stats,
    feature_stats,
    prepare_features,
    prepare_images,
    standardiser,
)
from cosmosfl.data.report import (
    label_summary,
    label_table,
    plot_label_distribution,
    write_label_csv,
)
from cosmosfl.data.sources import (
    DATASET_NAMES,
    TABLE_SUFFIXES,
    Dataset,
    DatasetFormatError,
    DatasetNotFoundError,
    ImageDataset,
    load_dataset,
    subsample,
)

__all__ = [
    "DATASET_NAMES",
    "PARTITIONERS",
    "TABLE_SUFFIXES",
    "Augmentation",
    "CropFlip",
    "DataError",
    "Dataset",
    "DatasetFormatError",
    "DatasetNotFoundError",
    "FeatureNoise",
    "ImageDataset",
    "Neighbours",
    "Partition",
    "PartitionError",
    "channel_stats",
    "default_augmentation",
    "dirichlet_split",
    "feature_stats",
    "iid_split",
    "label_summary",
    "label_table",
    "load_dataset",
    "make_partition",
    "paper_split",
    "pathological_split",
    "plot_label_distribution",
    "prepare_features",
    "prepare_images",
    "standardiser",
    "subsample",
    "train_augmentation_for",
    "write_label_csv",
]
