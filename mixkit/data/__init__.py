"""Training datasets: kohya image folders with captions and repeats, JSONL manifests, aspect buckets.

A dataset is first *scanned* into plain `ImageRecord`s (path, caption, repeats, size), so every
policy decision (missing captions, unreadable images, bucketing) happens once, before training,
and is reported; tensors are only made when a batch is loaded.
"""

from mixkit.data.records import ImageRecord, ScanReport
from mixkit.data.captions import MISSING_CAPTION_POLICIES, MissingCaptionError
from mixkit.data.kohya_folder import scan_kohya_folder
from mixkit.data.jsonl_manifest import scan_jsonl_manifest
from mixkit.data.bucketing import Bucket, assign_bucket, make_buckets
from mixkit.data.image_dataset import BucketedImageDataset, BucketSettings, EmptyDatasetError

__all__ = [
    "Bucket", "BucketSettings", "BucketedImageDataset", "EmptyDatasetError", "ImageRecord", "MISSING_CAPTION_POLICIES",
    "MissingCaptionError", "ScanReport", "assign_bucket", "make_buckets", "scan_jsonl_manifest", "scan_kohya_folder",
]
