"""A pytest plugin (``-p langchain_substitution``) that puts chunkd's drop-in classes
in the place of LangChain's before any test module imports them, and checks at
collection that the tests really got chunkd's."""

from __future__ import annotations

import langchain_text_splitters
import langchain_text_splitters.character

from chunkd import langchain as drop_in

SUBSTITUTED = ("RecursiveCharacterTextSplitter", "CharacterTextSplitter")

for _name in SUBSTITUTED:
    for _module in (langchain_text_splitters, langchain_text_splitters.character):
        setattr(_module, _name, getattr(drop_in, _name))


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        for name in SUBSTITUTED:
            found = item.module.__dict__.get(name)
            if found is not None and found is not getattr(drop_in, name):
                raise RuntimeError(f"{item.module.__name__}.{name} is not chunkd's")
