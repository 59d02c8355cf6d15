from chunkd.units.kept import KeptCounts

def piece_sum(kept: KeptCounts, text: str, limit: int, marks: str = "",
              ideographs: bool = False) -> int: ...
