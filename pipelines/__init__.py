"""Named input-pipeline recipes built from tfdist.data, one small module each: digits,
image_folder, hdf5, tfds, synthetic. `tfdist.data.load_pipeline(NAME or path.py)` loads one;
copy pipelines/digits.py to write your own."""
