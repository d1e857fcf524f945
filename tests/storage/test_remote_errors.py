"""The errors of remote storage (sackli/_storage/_s3.py, _gcs.py, _urls.py):
missing objects, refused credentials, corrupt objects, bad URLs."""

from __future__ import annotations

import re
import struct

import pytest

import sackli
from remote_helpers import (  # loaded through conftest.py
    BUCKET, SEPARATE, servers, Remote, remote, write_bag, make_records,
)


# --- 3. Errors ------------------------------------------------------------------------


def test_missing_object_or_bucket_raises_file_not_found(remote):
    for url in (remote.url("nope.bag"), f"{remote.scheme}://no-such-bucket-sackli/x.bag"):
        with pytest.raises(FileNotFoundError) as caught:
            sackli.Reader(url)
        assert url in str(caught.value)
    # SEPARATE placement without the limits object names the limits object.
    write_bag(remote.url("tail.bag"), [b"x"])
    with pytest.raises(FileNotFoundError, match=re.escape(remote.url("limits.tail.bag"))):
        sackli.Reader(remote.url("tail.bag"), limits_placement=SEPARATE)
    with pytest.raises(FileNotFoundError, match=re.escape(f"{remote.scheme}://no-such-bucket-sackli/")):
        sackli.Reader(f"{remote.scheme}://no-such-bucket-sackli/x@*.bag")


def test_writing_to_a_missing_bucket_raises_file_not_found(remote):
    # Regression: boto3's upload_file wraps the ClientError in an
    # S3UploadFailedError (no OSError, no s3:// URL); S3Store unwraps it.
    url = f"{remote.scheme}://no-such-bucket-sackli/x.bag"
    with pytest.raises(FileNotFoundError) as caught:
        with sackli.Writer(url) as writer:
            writer.write(b"x")
    assert url in str(caught.value)


def test_s3_refused_credentials_raise_permission_error(servers):
    """moto accepts any credentials by default; its /moto-api/reset-auth
    switch (the server side of INITIAL_NO_AUTH_ACTION_COUNT) makes it check
    signatures and IAM policies. Refused: an unknown access key, a wrong
    secret, and a real IAM user without any permission."""
    import boto3

    remote = Remote("s3", servers, "perm/")
    url = remote.url("secret.bag")
    write_bag(url, [b"x"])
    opened = sackli.Reader(url)  # opened while access is still open
    # The moto server answers IAM requests too.
    iam = boto3.session.Session().client(
        "iam", endpoint_url=servers.moto.url, region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing")
    iam.create_user(UserName="nobody")
    key = iam.create_access_key(UserName="nobody")["AccessKey"]
    refused = [("AKIAUNKNOWN000000000", "whatever", "InvalidAccessKeyId"),
               (key["AccessKeyId"], "wrong-secret", "SignatureDoesNotMatch"),
               (key["AccessKeyId"], key["SecretAccessKey"], "AccessDenied")]
    servers.moto.enable_auth()
    try:
        for key_id, secret, code in refused:
            with remote.endpoint(servers.proxies["s3"].url, AWS_ACCESS_KEY_ID=key_id,
                                 AWS_SECRET_ACCESS_KEY=secret):
                with pytest.raises(PermissionError) as caught:
                    sackli.Reader(url)  # the GET of its tail
                assert url in str(caught.value)
                with pytest.raises(PermissionError, match=code) as caught:
                    opened[0]  # a GET
                assert url in str(caught.value)
                # A LIST. (moto checks the signature of a listing whose prefix
                # holds a "/" wrongly, so its code is not checked here.)
                with pytest.raises(PermissionError) as caught:
                    sackli.Reader(remote.url("secret@*.bag"))
                assert remote.url("secret") in str(caught.value)
    finally:
        servers.moto.disable_auth()
    assert opened.read() == [b"x"]


def test_s3_refused_upload_raises_permission_error(servers):
    # Regression: as above, boto3's S3UploadFailedError must be unwrapped.
    remote = Remote("s3", servers, "perm-upload/")
    url = remote.url("denied.bag")
    servers.moto.enable_auth()
    try:
        with remote.endpoint(servers.proxies["s3"].url, AWS_ACCESS_KEY_ID="AKIAUNKNOWN000000001"):
            with pytest.raises(PermissionError) as caught:
                write_bag(url, [b"x"])
            assert url in str(caught.value)
    finally:
        servers.moto.disable_auth()


def test_gcs_refused_access_raises_permission_error(servers):
    """fake-gcs-server does no authorization at all, so here the proxy
    answers 403 with the JSON error body GCS sends for a forbidden request."""
    remote = Remote("gs", servers, "perm/")
    url = remote.url("secret.bag")
    write_bag(url, [b"x"])
    proxy = servers.proxies["gs"]
    try:
        for kind, open_spec in (("GET", url), ("LIST", remote.url("secret@*.bag"))):
            proxy.fail_next(1, status=403, kinds=[kind])
            with pytest.raises(PermissionError) as caught:
                sackli.Reader(open_spec)
            assert remote.url("secret") in str(caught.value)
        reader = sackli.Reader(url)
        proxy.fail_next(1, status=403, kinds=["GET"])
        with pytest.raises(PermissionError, match=re.escape(url)):
            reader[0]
        proxy.fail_next(1, status=403, kinds=["POST", "PUT"])
        with pytest.raises(PermissionError, match=re.escape(remote.url("new.bag"))):
            write_bag(remote.url("new.bag"), [b"y"])
    finally:
        proxy.reset_faults()


def test_corrupt_remote_object_raises_corruption_error(remote):
    # Not a bag at all.
    remote.put("garbage.bag", b"this is not a bag file, just some text.")
    with pytest.raises(sackli.CorruptionError, match=re.escape(remote.url("garbage.bag"))):
        sackli.Reader(remote.url("garbage.bag"))
    # A bag cut short by a few bytes.
    write_bag(remote.url("whole.bag"), make_records(20, 9))
    remote.put("cut.bag", remote.get("whole.bag")[:-3])
    with pytest.raises(sackli.CorruptionError, match=re.escape(remote.url("cut.bag"))):
        sackli.Reader(remote.url("cut.bag"))
    # A .bagz whose first record's zstd frame is damaged: opening works, the
    # record read names the object.
    write_bag(remote.url("z.bagz"), [b"hello world " * 20, b"fine"])
    data = bytearray(remote.get("z.bagz"))
    data[0:4] = b"\xde\xad\xbe\xef"
    remote.put("bad.bagz", bytes(data))
    reader = sackli.Reader(remote.url("bad.bagz"))
    assert reader[1] == b"fine"
    with pytest.raises(sackli.CorruptionError, match=re.escape(remote.url("bad.bagz"))):
        reader[0]
    with pytest.raises(sackli.CorruptionError, match=re.escape(remote.url("bad.bagz"))):
        reader.read()


@pytest.mark.parametrize("storage", ["ON_DISK", "IN_MEMORY"])
def test_non_monotonic_limits_never_read_foreign_bytes(remote, storage):
    """Remote sources are unmapped: records 4 and 6 of a bag whose limits[5]
    is 3 come from one coalesced GET, and record 6 spans [3, 7000) of it (the
    coalesced read used to point before its buffer)."""
    records = [bytes([65 + k]) * 1000 for k in range(10)]
    section = b"".join(records)
    limits = [1000 * (k + 1) for k in range(10)]
    limits[5] = 3
    remote.put("nonmono.bag", section + struct.pack("<10Q", *limits))
    reader = sackli.Reader(remote.url("nonmono.bag"), limits_storage=storage)
    assert reader.read_indices([4, 6]) == [records[4], section[3:7000]]
    assert reader[6] == section[3:7000]
    assert list(reader.read_range_iter(6, 4)) == [section[3:7000]] + records[7:]
    with pytest.raises(sackli.CorruptionError, match=re.escape(remote.url("nonmono.bag"))):
        reader[5]
    with pytest.raises(sackli.CorruptionError, match=re.escape(remote.url("nonmono.bag"))):
        list(reader)


def test_url_without_object_name_raises_value_error(remote):
    # Regression: without an object name, the SDKs raise their own errors
    # (botocore's ParamValidationError, a ValueError without the URL).
    for spec in (f"{remote.scheme}://{BUCKET}", f"{remote.scheme}://{BUCKET}/",
                 f"/{remote.scheme}:/{BUCKET}"):
        with pytest.raises(ValueError) as caught:
            sackli.Reader(spec)
        assert BUCKET in str(caught.value)


def test_unsupported_scheme_raises_value_error(tmp_path):
    for spec in ("hdfs://x/y", "hdfs://x/y@*.bag", "ftp://host/x@3.bag", f"{tmp_path}/a.bag,hdfs://x/y"):
        with pytest.raises(ValueError, match="not supported"):
            sackli.Reader(spec)
    with pytest.raises(ValueError, match="not supported"):
        sackli.Writer("hdfs://x/y.bag")
    with pytest.raises(ValueError):
        sackli.Reader("s3://")  # no bucket
