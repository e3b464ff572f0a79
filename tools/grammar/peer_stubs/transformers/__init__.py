# Stand-in for transformers: xgrammar imports these names for type checks only when given raw vocabularies.
class PreTrainedTokenizerBase: pass
class PreTrainedTokenizerFast(PreTrainedTokenizerBase): pass
class LogitsProcessor: pass
class LogitsProcessorList(list): pass
