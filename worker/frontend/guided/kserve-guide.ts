// The TensorRT-LLM backend's guided decoding inputs on ensemble, tensorrt_llm_bls and tensorrt_llm (and the same
// names in generate / generate_stream bodies): guided_decoding_guide_type ("json", "json_schema", "regex",
// "ebnf_grammar") and guided_decoding_guide (the schema, regex or grammar text; not used by "json", as
// TensorRT-LLM's GuidedDecodingParams ignores it there). Pure.
import type { GuidedDecodingParams, GuideType } from '../../binding/addon-types.js';
import { describeValue } from '../../common/errors.js';
import { badRequest } from '../http-errors.js';
import type { GuideSource } from './guide-errors.js';

export const GUIDE_TYPE_INPUT = 'guided_decoding_guide_type';
export const GUIDE_INPUT = 'guided_decoding_guide';
export const GUIDE_TYPES: readonly GuideType[] = ['json', 'json_schema', 'regex', 'ebnf_grammar'];
const WHAT: Record<GuideType, string> = {
  json: '', json_schema: 'the JSON Schema text', regex: 'the regular expression', ebnf_grammar: 'the GBNF grammar text',
};

/** Engine errors about a KServe guide name the guide input. */
export const KSERVE_GUIDE_SOURCE: GuideSource = { field: GUIDE_INPUT, typeField: GUIDE_TYPE_INPUT };

/** One batch element's constraint, from its values of the two inputs (`get` reads an input for this element). */
export function readKserveGuide(get: (name: string) => unknown): GuidedDecodingParams | undefined {
  const type = get(GUIDE_TYPE_INPUT);
  const guide = get(GUIDE_INPUT);
  if (type === undefined || type === null) {
    if (guide !== undefined && guide !== null) {
      throw badRequest(`${GUIDE_INPUT} needs ${GUIDE_TYPE_INPUT} (one of ${GUIDE_TYPES.join(', ')}) to say what it is`, GUIDE_TYPE_INPUT);
    }
    return undefined;
  }
  if (typeof type !== 'string' || !(GUIDE_TYPES as readonly string[]).includes(type)) {
    throw badRequest(`${GUIDE_TYPE_INPUT} must be one of ${GUIDE_TYPES.join(', ')}, got ${describeValue(type)}`, GUIDE_TYPE_INPUT);
  }
  const guideType = type as GuideType;
  if (guideType === 'json') return { guideType };
  if (typeof guide !== 'string' || guide === '') {
    throw badRequest(`${GUIDE_INPUT} is required with ${GUIDE_TYPE_INPUT} "${guideType}" (${WHAT[guideType]}), got ${guide === undefined || guide === null ? 'none' : describeValue(guide)}`, GUIDE_INPUT);
  }
  return { guideType, guide };
}
