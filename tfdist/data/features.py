"""Feature specs: how a sample (a dict of NumPy values) is stored in a tf.train.Example.

A spec maps each feature name to {"kind", "dtype", "shape"}; it is JSON, so it lives in the
manifest and a reader needs nothing else to parse the records:
  float  float_list, cast back to dtype        (float16/32/64 arrays)
  int    int64_list, cast back to dtype        (int16/32/64 arrays, labels)
  raw    the array's bytes, tf.io.decode_raw   (uint8/int8/bool arrays: 1 byte per value, not 8)
  bytes  one byte string, shape []             (encoded JPEG/PNG, text)
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import tensorflow as tf

from tfdist.data.errors import DataError

_RAW_DTYPES = ("uint8", "int8", "bool")


def spec_from_sample(sample: dict) -> dict:
    """The spec of a sample; every later sample must match it."""
    spec = {}
    for name, value in sample.items():
        if isinstance(value, (bytes, str)):
            spec[name] = {"kind": "bytes", "dtype": "string", "shape": []}
            continue
        array = np.asarray(value)
        if array.dtype.kind == "f":
            kind = "float"
        elif array.dtype.name in _RAW_DTYPES:
            kind = "raw"
        elif array.dtype.kind in "iu":
            kind = "int"
        else:
            raise DataError(f"feature {name!r} has dtype {array.dtype}; expected numbers, bool "
                            "or bytes.")
        spec[name] = {"kind": kind, "dtype": array.dtype.name, "shape": list(array.shape)}
    return spec


def check_sample(sample: dict, spec: dict, where: str) -> None:
    if set(sample) != set(spec):
        raise DataError(f"{where}: features {sorted(sample)} differ from the first sample's "
                        f"{sorted(spec)}.")
    for name, feature in spec.items():
        if feature["kind"] != "bytes" and list(np.shape(sample[name])) != feature["shape"]:
            raise DataError(f"{where}: feature {name!r} has shape {list(np.shape(sample[name]))}"
                            f", the first sample had {feature['shape']}; resize or pad the "
                            "samples to one shape.")


def encode_example(sample: dict, spec: dict) -> bytes:
    feature = {}
    for name, f in spec.items():
        value = sample[name]
        if f["kind"] == "bytes":
            data = value.encode() if isinstance(value, str) else bytes(value)
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[data]))
        elif f["kind"] == "raw":
            data = np.ascontiguousarray(value, dtype=f["dtype"]).tobytes()
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[data]))
        elif f["kind"] == "float":
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(
                value=np.asarray(value, np.float32).ravel()))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(
                value=np.asarray(value, np.int64).ravel()))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def parser(spec: dict) -> Callable[[tf.Tensor], dict]:
    """A function from one serialized tf.train.Example to a dict of tensors of the spec."""
    parse_spec = {}
    for name, f in spec.items():
        if f["kind"] in ("bytes", "raw"):
            parse_spec[name] = tf.io.FixedLenFeature([], tf.string)
        elif f["kind"] == "float":
            parse_spec[name] = tf.io.FixedLenFeature(f["shape"], tf.float32)
        else:
            parse_spec[name] = tf.io.FixedLenFeature(f["shape"], tf.int64)

    def parse(record: tf.Tensor) -> dict:
        parsed = tf.io.parse_single_example(record, parse_spec)
        out = {}
        for name, f in spec.items():
            value = parsed[name]
            if f["kind"] == "raw":
                # bool has no decode_raw type; its bytes are uint8 0/1.
                raw_dtype = tf.uint8 if f["dtype"] == "bool" else tf.as_dtype(f["dtype"])
                value = tf.reshape(tf.io.decode_raw(value, raw_dtype), f["shape"])
            if f["kind"] != "bytes":
                value = tf.cast(value, tf.as_dtype(f["dtype"]))
            out[name] = value
        return out

    return parse
