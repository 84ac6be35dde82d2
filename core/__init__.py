"""The ground floor: what every other package may import, and which imports none of them.

`core.atomic` writes files and folders whole (temporary name, then rename),
`core.downloads` fetches files into the cache folder, verified and resumable,
`core.extras` names the `pip install` line of an optional feature's missing
package, `core.record_schema` names the features of BERT's records (the
encoder's inputs among them) for their writers and readers, and
`core.framework` is the one place that knows Keras and TensorFlow internals.
"""
