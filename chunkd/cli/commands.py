"""The subcommands of ``chunkd``: a name to the module that runs it and a one-line
summary. The command line dispatches on it and the filter's help lists it, so it
imports nothing."""

COMMANDS: dict[str, tuple[str, str]] = {
    "watch": ("chunkd.service.daemon", "chunk every file dropped into a folder (a service)"),
    "serve": ("chunkd.web.serve", "a local page to try settings on your documents and see the chunks"),
    "preview": ("chunkd.web.preview", "one document's chunks as a self-contained HTML page"),
    "extract": ("chunkd.cli.extract",
                "the text a PDF, HTML or DOCX document becomes, which chunks' offsets refer to"),
    "sync": ("chunkd.service.sync",
             "make a vector store (pgvector, LanceDB) hold exactly a folder's current chunks"),
    "eval": ("chunkd.evaluate.command",
             "measure which settings retrieve best on your own questions, offline"),
}
