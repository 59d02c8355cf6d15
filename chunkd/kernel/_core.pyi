"""Type stubs for the compiled streaming core (chunkd/kernel/_core.pyx); its classes are used
from the compiled modules only."""

DEBUG_BUILD: bool

def pad_heap(bytes: int) -> bool: ...
