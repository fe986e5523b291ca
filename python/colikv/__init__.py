"""colikv: LLM KV-cache conversations in SQLite or PostgreSQL.

    import colikv, numpy as np
    m = colikv.Model(n_layers=78, kv_lora=512, qk_rope=64, vocab=154880, weights_id="w...")
    with colikv.Store("kv.db", create=True) as s:      # or a postgresql:// URI
        s.append("conv", m, tokens, lc, rc)            # int32 (n,), float32 (78, n, 512), (78, n, 64)
        kv = s.load("conv", m)                         # kv.tokens, kv.lc, kv.rc, kv.ic: numpy arrays

Every failing call raises a subclass of colikv.Error and changes nothing in
the store; see help(colikv.Store).
"""

from ._colikv import (  # noqa: F401  (the package's API)
    __version__,
    library_schema_version,
    Model,
    KV,
    Store,
    ConversationInfo,
    UsageStats,
    StoreStats,
    VerifyProblem,
    UncomparedShare,
    VerifyReport,
    EvictionReport,
    VacuumReport,
    ImportResult,
    CopyResult,
    TenantInfo,
    read_coli_kv,
    weights_id_from_dir,
    is_postgres_location,
    shown_store_location,
    process_metrics,
    Error,
    NotFound,
    ModelMismatch,
    Diverged,
    Conflict,
    Corrupt,
    Busy,
    DiskFull,
    InvalidArgument,
    IO,
    ReadOnly,
    TooLarge,
    Version,
    Internal,
    Evicted,
    Unsupported,
)

__all__ = [
    "__version__", "library_schema_version", "Model", "KV", "Store", "ConversationInfo", "UsageStats",
    "StoreStats", "VerifyProblem", "UncomparedShare", "VerifyReport", "EvictionReport", "VacuumReport",
    "ImportResult", "CopyResult", "TenantInfo", "read_coli_kv", "weights_id_from_dir", "is_postgres_location",
    "shown_store_location", "process_metrics", "Error", "NotFound", "ModelMismatch", "Diverged", "Conflict", "Corrupt", "Busy",
    "DiskFull", "InvalidArgument", "IO", "ReadOnly", "TooLarge", "Version", "Internal", "Evicted",
    "Unsupported",
]
