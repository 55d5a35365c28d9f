"""Run storage: a run folder on a local path or under an object-store URL (`s3://bucket/prefix`).

With `surreal launch --folder s3://bucket/prefix` the run lives in the bucket: config.json,
run.json, experiment.yaml, the `code/` copy of a file learner, metrics.jsonl, TensorBoard events
(`tb/`), status.json, checkpoints and, at the end, the processes' logs. Every process works in a
local mirror of the run (`surreal.runtime.runfolder.storage_sync`): it fetches what it needs from the bucket when it
starts and uploads the files it writes every few seconds and when it ends. `surreal status`,
`surreal eval` and `surreal launch --resume` accept the URL. The key pair of an encrypted run
(`keys/`) never goes to the bucket.

The endpoint and credentials come from the standard AWS settings boto3 reads
(`AWS_ENDPOINT_URL` or `AWS_ENDPOINT_URL_S3`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
`AWS_DEFAULT_REGION`, `~/.aws/`), so any S3-compatible store works (MinIO, Ceph, moto).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

SCHEME = "s3://"

NEVER_UPLOADED = ("keys/",)
"""Run files that stay on the machine that wrote them (the run's Curve key pair)."""


class StorageError(ValueError):
    """The object store cannot be used (unreachable, no bucket, no credentials): one line that
    says what to do."""


def is_remote(ref: str | os.PathLike[str] | None) -> bool:
    """Whether `ref` names a run folder in an object store (`s3://...`)."""
    return str(ref or "").startswith(SCHEME)


def fsync_dir(folder: Path) -> None:
    """Make the renames in a local `folder` durable (where the filesystem allows it): what a
    checkpoint or a replay part written as temp file + rename needs after the rename."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def join(url: str, *parts: str) -> str:
    """`url/part/...` without doubled slashes."""
    return "/".join([url.rstrip("/"), *(p.strip("/") for p in parts if p.strip("/"))])


@dataclass(frozen=True)
class ObjectInfo:
    """One object under a folder URL: its path relative to that folder, size and time."""

    rel: str
    size: int
    modified: float


class S3Folder:
    """A folder in an S3 bucket (`s3://bucket/prefix`), through boto3.

    Raises StorageError on the first call that cannot reach the store; `check()` makes that
    call up front.
    """

    def __init__(self, url: str) -> None:
        if not is_remote(url):
            raise StorageError(f"{url}: not an object-store URL (s3://bucket/prefix)")
        bucket, _, key = url[len(SCHEME) :].partition("/")
        if not bucket:
            raise StorageError(f"{url}: name a bucket, e.g. s3://my-bucket/runs")
        self.url, self.bucket, self.key = url.rstrip("/"), bucket, key.strip("/")
        self._client: Any = None

    @property
    def client(self) -> Any:
        """The boto3 S3 client (endpoint and credentials from the AWS environment)."""
        if self._client is None:
            try:
                import boto3
                from botocore.config import Config
            except ModuleNotFoundError as err:
                raise StorageError(
                    f"{self.url}: object-store run folders need boto3: "
                    "pip install 'surreal-stack[s3]'"
                ) from err
            self._client = boto3.client(
                "s3",
                config=Config(connect_timeout=5, read_timeout=60, retries={"max_attempts": 3}),
            )
        return self._client

    def _object_key(self, rel: str) -> str:
        return "/".join(p for p in (self.key, rel.strip("/")) if p)

    def child(self, *parts: str) -> S3Folder:
        """The folder `self/parts...`."""
        return S3Folder(join(self.url, *parts))

    def _call(self, what: str, fn: Any, **kwargs: Any) -> Any:
        """Call the client; translate the ways a store can be unusable into one-line errors."""
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            EndpointConnectionError,
            NoCredentialsError,
        )

        endpoint = getattr(self.client.meta, "endpoint_url", "?")
        try:
            return fn(**kwargs)
        except NoCredentialsError as err:
            raise StorageError(
                f"{self.url}: no credentials for the object store; set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)"
            ) from err
        except EndpointConnectionError as err:
            raise StorageError(
                f"{self.url}: cannot reach the object store at {endpoint}; check "
                "AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3) and the network"
            ) from err
        except ClientError as err:
            code = str(err.response.get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchBucket"):
                raise StorageError(
                    f"{self.url}: bucket {self.bucket!r} does not exist at {endpoint}; "
                    "create it first (aws s3 mb s3://BUCKET)"
                ) from err
            if code in ("403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                raise StorageError(
                    f"{self.url}: access denied to bucket {self.bucket!r} ({code}); check the "
                    "credentials and the bucket policy"
                ) from err
            raise StorageError(f"{self.url}: {what} failed: {err}") from err
        except BotoCoreError as err:
            raise StorageError(f"{self.url}: {what} failed: {err}") from err

    def check(self) -> None:
        """Raise StorageError unless the bucket exists and answers with these credentials."""
        self._call("head_bucket", self.client.head_bucket, Bucket=self.bucket)

    def list(self, rel: str = "") -> Iterator[ObjectInfo]:
        """Every object under `self/rel` (recursively), with paths relative to `self`."""
        prefix = self._object_key(rel)
        prefix = f"{prefix}/" if prefix else ""
        paginator = self.client.get_paginator("list_objects_v2")
        pages = self._call(
            "list", lambda: list(paginator.paginate(Bucket=self.bucket, Prefix=prefix))
        )
        start = len(self.key) + 1 if self.key else 0
        for page in pages:
            for obj in page.get("Contents", []):
                modified: datetime = obj["LastModified"]
                yield ObjectInfo(obj["Key"][start:], int(obj["Size"]), modified.timestamp())

    def children(self) -> list[str]:
        """Names of the immediate sub-folders of this folder."""
        prefix = f"{self.key}/" if self.key else ""
        paginator = self.client.get_paginator("list_objects_v2")
        pages = self._call(
            "list",
            lambda: list(paginator.paginate(Bucket=self.bucket, Prefix=prefix, Delimiter="/")),
        )
        names = []
        for page in pages:
            for common in page.get("CommonPrefixes", []):
                names.append(common["Prefix"][len(prefix) :].strip("/"))
        return names

    def stat(self, rel: str) -> ObjectInfo | None:
        """The object `self/rel` (size, time), or None when there is none."""
        key = self._object_key(rel)
        page = self._call(
            "list", self.client.list_objects_v2, Bucket=self.bucket, Prefix=key, MaxKeys=1
        )
        contents = page.get("Contents", [])
        if not contents or contents[0]["Key"] != key:
            return None
        obj = contents[0]
        return ObjectInfo(rel, int(obj["Size"]), obj["LastModified"].timestamp())

    def exists(self, rel: str = "") -> bool:
        """Whether `self/rel` is an object, or (rel="") whether this folder holds any object."""
        key = self._object_key(rel)
        prefix = key if rel else (f"{key}/" if key else "")
        page = self._call(
            "list", self.client.list_objects_v2, Bucket=self.bucket, Prefix=prefix, MaxKeys=1
        )
        contents = page.get("Contents", [])
        return bool(contents) and (not rel or contents[0]["Key"] == key)

    def download(self, rel: str, target: Path, modified: float | None = None) -> None:
        """Fetch `self/rel` into `target` atomically; its mtime becomes the object's time."""
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
        self._call(
            "download",
            self.client.download_file,
            Bucket=self.bucket,
            Key=self._object_key(rel),
            Filename=str(tmp),
        )
        if modified is not None:
            os.utime(tmp, (modified, modified))
        os.replace(tmp, target)

    def upload(self, source: Path, rel: str) -> None:
        """Store the file `source` as `self/rel`."""
        self._call(
            "upload",
            self.client.upload_file,
            Filename=str(source),
            Bucket=self.bucket,
            Key=self._object_key(rel),
        )

    def delete(self, rel: str) -> None:
        """Delete the object `self/rel` (nothing happens when there is none)."""
        self._call(
            "delete", self.client.delete_object, Bucket=self.bucket, Key=self._object_key(rel)
        )

    def read_text(self, rel: str) -> str:
        """The text of the object `self/rel`."""
        body = self._call(
            "get", self.client.get_object, Bucket=self.bucket, Key=self._object_key(rel)
        )["Body"]
        return body.read().decode()
