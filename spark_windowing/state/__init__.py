"""Persisted operator state, above the operator: ``state_codec`` (the encoding every snapshot
shares; its ``loads`` reads pickles of earlier releases), ``snapshot`` (the whole state as bytes:
``snapshot`` / ``restore``), ``segments`` (the state store's files) and ``store`` (``StateStore``,
bucketed and incrementally persisted, for Spark). Depends on ``operator``.
"""

from spark_windowing._lazy import lazy_getattr

__getattr__ = lazy_getattr(__name__, {"StateStore": f"{__name__}.store"})
