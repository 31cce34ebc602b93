// OpenAI's response_format on /v1/chat/completions and /v1/completions: {"type": "text"} (no constraint),
// {"type": "json_object"} (any JSON object) or {"type": "json_schema", "json_schema": {name, schema, strict?,
// description?}}. Every JSON answer is enforced by the grammar engine whatever `strict` says: a constraint that is
// sometimes not kept would be worse than none. Pure.
import type { GuidedDecodingParams } from '../../binding/addon-types.js';
import { describeValue } from '../../common/errors.js';
import { badRequest } from '../http-errors.js';
import { checkFields, isPlainObject } from './object-fields.js';

const PARAM = 'response_format';
const TYPES = ['text', 'json_object', 'json_schema'];
// OpenAI's rule for a schema's name.
const NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** json_object is "an object, any object": the engine's 'json' guide would also allow a bare number or string. */
export const ANY_OBJECT: GuidedDecodingParams = { guideType: 'json_schema', guide: '{"type":"object"}' };

function readJsonSchema(value: unknown): GuidedDecodingParams {
  const where = `${PARAM}.json_schema`;
  if (!isPlainObject(value)) throw badRequest(`${where} must be an object {"name": ..., "schema": {...}}, got ${describeValue(value)}`, PARAM);
  checkFields(value, ['name', 'schema', 'strict', 'description'], where, PARAM);
  if (typeof value.name !== 'string' || !NAME.test(value.name)) {
    throw badRequest(`${where}.name must be 1 to 64 letters, digits, underscores or dashes, got ${describeValue(value.name)}`, PARAM);
  }
  if (value.strict !== undefined && value.strict !== null && typeof value.strict !== 'boolean') {
    throw badRequest(`${where}.strict must be a boolean, got ${describeValue(value.strict)}`, PARAM);
  }
  if (value.description !== undefined && value.description !== null && typeof value.description !== 'string') {
    throw badRequest(`${where}.description must be a string, got ${describeValue(value.description)}`, PARAM);
  }
  if (!isPlainObject(value.schema)) throw badRequest(`${where}.schema must be an object (a JSON Schema), got ${describeValue(value.schema)}`, PARAM);
  return { guideType: 'json_schema', guide: JSON.stringify(value.schema) };
}

/** The constraint response_format asks for; undefined for none (absent, null or {"type": "text"}). */
export function readResponseFormat(value: unknown): GuidedDecodingParams | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isPlainObject(value)) throw badRequest(`${PARAM} must be an object such as {"type": "json_object"}, got ${describeValue(value)}`, PARAM);
  switch (value.type) {
    case 'text':
      checkFields(value, ['type'], PARAM, PARAM);
      return undefined;
    case 'json_object':
      checkFields(value, ['type'], PARAM, PARAM);
      return ANY_OBJECT;
    case 'json_schema':
      checkFields(value, ['type', 'json_schema'], PARAM, PARAM);
      return readJsonSchema(value.json_schema);
    default:
      throw badRequest(`${PARAM}.type must be one of ${TYPES.map((t) => `"${t}"`).join(', ')}, got ${describeValue(value.type)}`, PARAM);
  }
}
