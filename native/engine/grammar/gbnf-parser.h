// GBNF (llama.cpp's grammar notation, which XGrammar's EBNF also reads) into a finalized byte-level Grammar:
//   name ::= alternatives          one rule; the start rule is `root`; a rule ends where the next `name ::=` begins
//   "literal"  [a-z\u00e9]  [^"\\]  .   terminals (escapes \n \r \t \\ \" \/ \xHH \uHHHH \UHHHHHHHH; `.` any character)
//   ( )  |  *  +  ?  {m}  {m,}  {m,n}  grouping, alternation, repetition;   # comment to the end of the line
// Repetition is lowered to fresh right-recursive rules and classes to UTF-8 byte sets, so the result has neither.
#pragma once
#include <string>
#include <string_view>

#include "grammar/grammar.h"

namespace engine::grammar {

// Bounded repetition {m,n} is expanded, so n is capped; a grammar past kMaxGrammarElements is refused.
constexpr int32_t kMaxRepetition = 1000;
constexpr size_t kMaxGrammarElements = 1u << 20;
// Groups ( ... ) are parsed by recursion, about 250 bytes of stack a level, so their nesting is capped at a quarter
// of a 1 MB stack (the threads that compile guides have 8 MB); rules nest without limit. Grammars written by hand or
// generated nest groups a few dozen deep at most.
constexpr int32_t kMaxGroupNesting = 1000;

// Throws EngineError(invalid_argument) "<what>: <problem> at line L, column C[; <what to do>]", e.g. "ebnf_grammar:
// groups ( ... ) nested more than 1000 deep at line 2, column 31; give inner groups rules of their own". `what` names
// the guide in messages ("ebnf_grammar", or the front-end that generated the text).
Grammar parse_gbnf(std::string_view text, const std::string& what = "grammar");

}  // namespace engine::grammar
