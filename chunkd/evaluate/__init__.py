"""``chunkd eval``: which settings retrieve best, measured on the user's own questions.

    documents --(each setting of the grid: chunkd.strategies.build)--> chunks
    chunks --(a retriever: BM25)--> each question's top k chunks
    top k + the question's reference ranges --(metrics)--> scores per question,
    then their mean and standard deviation per setting and per document

Modules: ``questions`` (reading questions and finding their references), ``grid``
(settings from the options' comma lists), ``retrieval``, ``metrics``, ``evaluation``
(one setting, end to end), ``report`` (the table, records and chart), ``command``
(the subcommand). The retriever and the chart need the ``eval`` extra (``bm25s``,
``matplotlib``); nothing else is imported by ``chunkd`` itself.
"""
