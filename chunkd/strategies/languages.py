"""Separators for source code and markup: LangChain's ``from_language`` lists.

``RecursiveCharacterTextSplitter.get_separators_for_language`` (langchain-text-splitters
1.1, MIT licence), as data, so that ``--language`` works without LangChain installed;
the tests check every list against LangChain's own. The separators are regular
expressions, as ``from_language`` uses them (``is_separator_regex=True``); most are
plain literals, which the kernel searches as text and streams (``literal_text`` in
``chunkd.kernel.chosen``).
"""

from __future__ import annotations

#: Language name (LangChain's ``Language`` values) -> its separators, coarsest first.
LANGUAGE_SEPARATORS: dict[str, tuple[str, ...]] = {
    'cpp': (
        '\nclass ', '\nvoid ', '\nint ', '\nfloat ', '\ndouble ', '\nif ', '\nfor ',
        '\nwhile ', '\nswitch ', '\ncase ', '\n\n', '\n', ' ', '',
    ),
    'go': (
        '\nfunc ', '\nvar ', '\nconst ', '\ntype ', '\nif ', '\nfor ', '\nswitch ',
        '\ncase ', '\n\n', '\n', ' ', '',
    ),
    'java': (
        '\nclass ', '\npublic ', '\nprotected ', '\nprivate ', '\nstatic ', '\nif ',
        '\nfor ', '\nwhile ', '\nswitch ', '\ncase ', '\n\n', '\n', ' ', '',
    ),
    'kotlin': (
        '\nclass ', '\npublic ', '\nprotected ', '\nprivate ', '\ninternal ',
        '\ncompanion ', '\nfun ', '\nval ', '\nvar ', '\nif ', '\nfor ', '\nwhile ',
        '\nwhen ', '\nelse ', '\n\n', '\n', ' ', '',
    ),
    'js': (
        '\nfunction ', '\nconst ', '\nlet ', '\nvar ', '\nclass ', '\nif ', '\nfor ',
        '\nwhile ', '\nswitch ', '\ncase ', '\ndefault ', '\n\n', '\n', ' ', '',
    ),
    'ts': (
        '\nenum ', '\ninterface ', '\nnamespace ', '\ntype ', '\nclass ', '\nfunction ',
        '\nconst ', '\nlet ', '\nvar ', '\nif ', '\nfor ', '\nwhile ', '\nswitch ',
        '\ncase ', '\ndefault ', '\n\n', '\n', ' ', '',
    ),
    'php': (
        '\nfunction ', '\nclass ', '\nif ', '\nforeach ', '\nwhile ', '\ndo ',
        '\nswitch ', '\ncase ', '\n\n', '\n', ' ', '',
    ),
    'proto': (
        '\nmessage ', '\nservice ', '\nenum ', '\noption ', '\nimport ', '\nsyntax ',
        '\n\n', '\n', ' ', '',
    ),
    'python': (
        '\nclass ', '\ndef ', '\n\tdef ', '\n\n', '\n', ' ', '',
    ),
    'r': (
        '\nfunction ', '\nsetClass\\(', '\nsetMethod\\(', '\nsetGeneric\\(', '\nif ',
        '\nelse ', '\nfor ', '\nwhile ', '\nrepeat ', '\nlibrary\\(', '\nrequire\\(',
        '\n\n', '\n', ' ', '',
    ),
    'rst': (
        '\n=+\n', '\n-+\n', '\n\\*+\n', '\n\n.. *\n\n', '\n\n', '\n', ' ', '',
    ),
    'ruby': (
        '\ndef ', '\nclass ', '\nif ', '\nunless ', '\nwhile ', '\nfor ', '\ndo ',
        '\nbegin ', '\nrescue ', '\n\n', '\n', ' ', '',
    ),
    'rust': (
        '\nfn ', '\nconst ', '\nlet ', '\nif ', '\nwhile ', '\nfor ', '\nloop ',
        '\nmatch ', '\n\n', '\n', ' ', '',
    ),
    'scala': (
        '\nclass ', '\nobject ', '\ndef ', '\nval ', '\nvar ', '\nif ', '\nfor ',
        '\nwhile ', '\nmatch ', '\ncase ', '\n\n', '\n', ' ', '',
    ),
    'swift': (
        '\nfunc ', '\nclass ', '\nstruct ', '\nenum ', '\nif ', '\nfor ', '\nwhile ',
        '\ndo ', '\nswitch ', '\ncase ', '\n\n', '\n', ' ', '',
    ),
    'markdown': (
        '\n#{1,6} ', '```\n', '\n\\*\\*\\*+\n', '\n---+\n', '\n___+\n', '\n\n', '\n',
        ' ', '',
    ),
    'latex': (
        '\n\\\\chapter{', '\n\\\\section{', '\n\\\\subsection{', '\n\\\\subsubsection{',
        '\n\\\\begin{enumerate}', '\n\\\\begin{itemize}', '\n\\\\begin{description}',
        '\n\\\\begin{list}', '\n\\\\begin{quote}', '\n\\\\begin{quotation}',
        '\n\\\\begin{verse}', '\n\\\\begin{verbatim}', '\n\\\\begin{align}', '$$', '$',
        ' ', '',
    ),
    'html': (
        '<body', '<div', '<p', '<br', '<li', '<h1', '<h2', '<h3', '<h4', '<h5', '<h6',
        '<span', '<table', '<tr', '<td', '<th', '<ul', '<ol', '<header', '<footer',
        '<nav', '<head', '<style', '<script', '<meta', '<title', '',
    ),
    'sol': (
        '\npragma ', '\nusing ', '\ncontract ', '\ninterface ', '\nlibrary ',
        '\nconstructor ', '\ntype ', '\nfunction ', '\nevent ', '\nmodifier ',
        '\nerror ', '\nstruct ', '\nenum ', '\nif ', '\nfor ', '\nwhile ',
        '\ndo while ', '\nassembly ', '\n\n', '\n', ' ', '',
    ),
    'csharp': (
        '\ninterface ', '\nenum ', '\ndelegate ', '\nevent ', '\nclass ', '\nabstract ',
        '\npublic ', '\nprotected ', '\nprivate ', '\nstatic ', '\nreturn ', '\nif ',
        '\ncontinue ', '\nfor ', '\nforeach ', '\nwhile ', '\nswitch ', '\nbreak ',
        '\ncase ', '\nelse ', '\ntry ', '\nthrow ', '\nfinally ', '\ncatch ', '\n\n',
        '\n', ' ', '',
    ),
    'cobol': (
        '\nIDENTIFICATION DIVISION.', '\nENVIRONMENT DIVISION.', '\nDATA DIVISION.',
        '\nPROCEDURE DIVISION.', '\nWORKING-STORAGE SECTION.', '\nLINKAGE SECTION.',
        '\nFILE SECTION.', '\nINPUT-OUTPUT SECTION.', '\nOPEN ', '\nCLOSE ', '\nREAD ',
        '\nWRITE ', '\nIF ', '\nELSE ', '\nMOVE ', '\nPERFORM ', '\nUNTIL ',
        '\nVARYING ', '\nACCEPT ', '\nDISPLAY ', '\nSTOP RUN.', '\n', ' ', '',
    ),
    'c': (
        '\nclass ', '\nvoid ', '\nint ', '\nfloat ', '\ndouble ', '\nif ', '\nfor ',
        '\nwhile ', '\nswitch ', '\ncase ', '\n\n', '\n', ' ', '',
    ),
    'lua': (
        '\nlocal ', '\nfunction ', '\nif ', '\nfor ', '\nwhile ', '\nrepeat ', '\n\n',
        '\n', ' ', '',
    ),
    # perl: none in LangChain
    'haskell': (
        '\nmain :: ', '\nmain = ', '\nlet ', '\nin ', '\ndo ', '\nwhere ', '\n:: ',
        '\n= ', '\ndata ', '\nnewtype ', '\ntype ', '\nmodule ', '\nimport ',
        '\nqualified ', '\nimport qualified ', '\nclass ', '\ninstance ', '\ncase ',
        '\n| ', '\n= {', '\n, ', '\n\n', '\n', ' ', '',
    ),
    'elixir': (
        '\ndef ', '\ndefp ', '\ndefmodule ', '\ndefprotocol ', '\ndefmacro ',
        '\ndefmacrop ', '\nif ', '\nunless ', '\ncase ', '\ncond ', '\nwith ', '\nfor ',
        '\ndo ', '\n\n', '\n', ' ', '',
    ),
    'powershell': (
        '\nfunction ', '\nparam ', '\nif ', '\nforeach ', '\nfor ', '\nwhile ',
        '\nswitch ', '\nclass ', '\ntry ', '\ncatch ', '\nfinally ', '\n\n', '\n', ' ',
        '',
    ),
    'visualbasic6': (
        '\\n(?!End\\s)(?:Public|Private|Friend|Global|Static)\\s+?Sub\\s+',
        '\\n(?!End\\s)(?:Public|Private|Friend|Global|Static)\\s+?Function\\s+',
        '\\n(?!End\\s)(?:Public|Private|Friend|Global|Static)\\s+?Property\\s+(?:Get|Let|Set)\\s+',
        '\\n(?!End\\s)(?:Public|Private|Friend|Global|Static)\\s+?Type\\s+',
        '\\n(?!End\\s)(?:Public|Private|Friend|Global|Static)\\s+?Enum\\s+',
        '\\n(?!End\\s)If\\s+', '\\nElseIf\\s+', '\\nElse\\s+', '\\nSelect\\s+Case\\s+',
        '\\nCase\\s+', '\\nFor\\s+', '\\nDo\\s+', '\\nWhile\\s+', '\\nWith\\s+',
        '\\n\\n', '\\n', ' ', '',
    ),
}
