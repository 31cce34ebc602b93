// tools / tool_choice / parallel_tool_calls checked (each rejection names the field and the value), and what a
// forced call (tool_choice "required" or a named function) sends: the family's opener after the prompt and a JSON
// Schema of the family's payload, with each tool's parameters moved in whole ($defs and $refs included).
import t, { type Test } from 'tap';

import { TrtllmError } from '../../../../worker/common/errors.js';
import { guideError } from '../../../../worker/frontend/guided/guide-errors.js';
import { HttpError } from '../../../../worker/frontend/http-errors.js';
import { ChoiceToolCalls } from '../../../../worker/frontend/tools/choice-tool-calls.js';
import { embedSchema } from '../../../../worker/frontend/tools/embed-schema.js';
import { forcedCall } from '../../../../worker/frontend/tools/forced-call.js';
import { planTools } from '../../../../worker/frontend/tools/tool-plan.js';
import { readToolRequest } from '../../../../worker/frontend/tools/tool-request.js';

const weatherParams = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
const tool = (name: string, parameters?: unknown) => ({ type: 'function', function: { name, ...(parameters === undefined ? {} : { parameters }) } });

function bad(t: Test, body: Record<string, unknown>, param: string, pattern: RegExp): void {
  try {
    readToolRequest(body);
    t.fail(`expected a 400 matching ${pattern}`);
  } catch (error) {
    const ok = error instanceof HttpError && error.status === 400 && error.param === param && pattern.test(error.message);
    t.ok(ok, `${pattern} (${(error as Error).message}, param ${(error as HttpError).param})`);
  }
}

t.test('tools, tool_choice and parallel_tool_calls: defaults and every rejection', async (t) => {
  t.same(readToolRequest({}), { tools: [], choice: { mode: 'none' }, parallel: true });
  const r = readToolRequest({ tools: [tool('get_weather', weatherParams), tool('now')], parallel_tool_calls: false });
  t.same(r.tools, [{ name: 'get_weather', parameters: weatherParams }, { name: 'now' }]);
  t.same(r.choice, { mode: 'auto' }, 'tools without a choice: auto');
  t.equal(r.parallel, false);
  t.same(readToolRequest({ tools: [tool('a')], tool_choice: 'required' }).choice, { mode: 'required' });
  t.same(readToolRequest({ tools: [tool('a')], tool_choice: { type: 'function', function: { name: 'a' } } }).choice, { mode: 'named', name: 'a' });
  t.same(readToolRequest({ tool_choice: 'none' }).choice, { mode: 'none' });
  bad(t, { tools: 'x' }, 'tools', /tools must be an array of function tools, got "x" \(string\)/);
  bad(t, { tools: [{ type: 'function', function: {} }] }, 'tools', /tools\[0\]\.function\.name must be 1 to 64 letters.*got undefined/);
  bad(t, { tools: [tool('a b')] }, 'tools', /tools\[0\]\.function\.name must be .*got "a b" \(string\)/);
  bad(t, { tools: [tool('a', [1])] }, 'tools', /tools\[0\]\.function\.parameters must be an object \(a JSON Schema of the arguments\), got an array of length 1/);
  bad(t, { tools: [tool('a', 'x')] }, 'tools', /tools\[0\]\.function\.parameters must be an object.*got "x"/);
  bad(t, { tools: [{ type: 'retrieval' }] }, 'tools', /tools\[0\]\.type must be "function".*got "retrieval"/);
  bad(t, { tools: [{ type: 'function' }] }, 'tools', /tools\[0\]\.function must be an object/);
  bad(t, { tools: [{ type: 'function', function: { name: 'a', paramters: {} } }] }, 'tools', /unknown field 'tools\[0\]\.function\.paramters'/);
  bad(t, { tools: [tool('a'), tool('a')] }, 'tools', /tools\[1\]\.function\.name "a" \(string\) repeats tools\[0\]'s/);
  bad(t, { tools: [{ type: 'function', function: { name: 'a', strict: 'yes' } }] }, 'tools', /tools\[0\]\.function\.strict must be a boolean, got "yes"/);
  bad(t, { tools: [tool('a')], tool_choice: 'sometimes' }, 'tool_choice', /tool_choice must be "none", "auto", "required" or .*got "sometimes"/);
  bad(t, { tools: [tool('a')], tool_choice: { type: 'function', function: { name: 'b' } } }, 'tool_choice', /tool_choice\.function\.name "b" \(string\) names no tool; the tools are a/);
  bad(t, { tool_choice: { type: 'function', function: { name: 'b' } } }, 'tool_choice', /names no tool; the request has no tools/);
  bad(t, { tool_choice: 'required' }, 'tool_choice', /tool_choice "required" needs tools/);
  bad(t, { tools: [tool('a')], tool_choice: { type: 'function', function: {} } }, 'tool_choice', /tool_choice\.function\.name must be a string, got undefined/);
  bad(t, { tools: [tool('a')], parallel_tool_calls: 'x' }, 'parallel_tool_calls', /parallel_tool_calls must be a boolean, got "x"/);
});

t.test('forced calls: the opener after the prompt and the payload schema, per family', async (t) => {
  const w = { name: 'get_weather', parameters: weatherParams };
  const hermes = forcedCall('hermes', [w], [0], true);
  t.equal(hermes.promptSuffix, '<tool_call>\n');
  t.equal(hermes.guide.field, 'tool_choice');
  t.equal(hermes.guide.guided.guideType, 'json_schema');
  t.same(JSON.parse(hermes.guide.guided.guide!), {
    type: 'object', properties: { name: { const: 'get_weather' }, arguments: weatherParams }, required: ['name', 'arguments'], additionalProperties: false,
  });
  const llama = forcedCall('llama3_json', [w, { name: 'now' }], [0, 1], true);
  t.equal(llama.promptSuffix, '');
  t.same(JSON.parse(llama.guide.guided.guide!), {
    anyOf: [
      { type: 'object', properties: { name: { const: 'get_weather' }, parameters: weatherParams }, required: ['name', 'parameters'], additionalProperties: false },
      { type: 'object', properties: { name: { const: 'now' }, parameters: { type: 'object', properties: {}, additionalProperties: false } }, required: ['name', 'parameters'], additionalProperties: false },
    ],
  }, 'several tools: anyOf; a tool without parameters takes {} only');
  const mistral = forcedCall('mistral', [w], [0], false);
  t.equal(mistral.promptSuffix, '[TOOL_CALLS]');
  t.match(JSON.parse(mistral.guide.guided.guide!), { type: 'array', minItems: 1, maxItems: 1, items: { properties: { name: { const: 'get_weather' } } } }, 'one item without parallel_tool_calls');
  t.notOk('maxItems' in JSON.parse(forcedCall('mistral', [w], [0], true).guide.guided.guide!), 'parallel: any number of calls');
});

t.test('embedding a parameters schema keeps its $refs pointing at the right place', async (t) => {
  const params = {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    properties: { item: { $ref: '#/$defs/Item' }, again: { $ref: '#/properties/item' }, self: { $ref: '#' }, ext: { $ref: 'other.json#/x' } },
    $defs: { Item: { type: 'object', properties: { sub: { $ref: '#/definitions/Sub' } } } },
    definitions: { Sub: { type: 'integer' } },
  };
  const defs: Record<string, unknown> = {};
  const body = embedSchema(params, '/anyOf/1/properties/arguments', 'tool1_', defs);
  t.same(body, {
    type: 'object',
    properties: {
      item: { $ref: '#/$defs/tool1_Item' }, again: { $ref: '#/anyOf/1/properties/arguments/properties/item' },
      self: { $ref: '#/anyOf/1/properties/arguments' }, ext: { $ref: 'other.json#/x' },
    },
  });
  t.same(defs, { tool1_Item: { type: 'object', properties: { sub: { $ref: '#/$defs/tool1_Sub' } } }, tool1_Sub: { type: 'integer' } });
  t.same(params.properties.item, { $ref: '#/$defs/Item' }, 'the input is not modified');
  const forced = JSON.parse(forcedCall('hermes', [{ name: 'a', parameters: params }], [0], true).guide.guided.guide!);
  t.same(Object.keys(forced.$defs), ['tool0_Item', 'tool0_Sub'], 'the definitions land at the root');
  t.equal(forced.properties.arguments.properties.again.$ref, '#/properties/arguments/properties/item');
});

t.test("an engine error about a forced call's schema names the tool's parameters", async (t) => {
  const params = { type: 'object', properties: { item: { $ref: '#/$defs/Item' } }, $defs: { Item: { type: 'object' } } };
  const forced = forcedCall('mistral', [{ name: 'a' }, { name: 'b', parameters: params }], [1], true);
  t.same(forced.guide.paths, [['/items/properties/arguments', 'tools[1].function.parameters'], ['/$defs/tool1_Item', 'tools[1].function.parameters/$defs/Item']]);
  const error = (message: string) => (guideError(new TrtllmError(message, 'invalid_argument'), { field: 'tool_choice', param: 'tool_choice', paths: forced.guide.paths }) as Error).message;
  t.equal(error('json_schema: unsupported keyword "patternProperties" at /items/properties/arguments/properties/x'),
    'tool_choice: json_schema: unsupported keyword "patternProperties" at tools[1].function.parameters/properties/x');
  t.equal(error("json_schema: bad $ref at '/$defs/tool1_Item/properties'"), "tool_choice: json_schema: bad $ref at 'tools[1].function.parameters/$defs/Item/properties'");
  t.equal(error('json_schema: at /items/properties/argumentsX'), 'tool_choice: json_schema: at /items/properties/argumentsX', 'only whole pointer segments');
  const several = forcedCall('hermes', [{ name: 'a' }, { name: 'b', parameters: params }], [0, 1], true);
  t.same(several.guide.paths?.map(([from]) => from), ['/anyOf/0/properties/arguments', '/anyOf/1/properties/arguments', '/$defs/tool1_Item']);
});

t.test('plans: what the template sees, the prompt suffix, the guide and the parser', async (t) => {
  const request = readToolRequest({ tools: [tool('get_weather', weatherParams)] });
  const auto = planTools(request, 'hermes');
  t.equal((auto.templateTools as unknown[]).length, 1);
  t.same(auto.templateTools, [{ type: 'function', function: { name: 'get_weather', parameters: weatherParams } }], "HF's list of {type, function}");
  t.equal(auto.guide, undefined, 'auto: generate freely');
  t.equal(auto.inCall, false);
  t.equal(auto.promptSuffix, '');
  const none = planTools(readToolRequest({ tools: [tool('get_weather')], tool_choice: 'none' }), 'hermes');
  t.same([none.templateTools, none.syntax, none.guide], [null, undefined, undefined], 'none: no tools in the template, no parsing');
  const named = planTools(readToolRequest({ tools: [tool('a'), tool('get_weather', weatherParams)], tool_choice: { type: 'function', function: { name: 'get_weather' } } }), 'mistral');
  t.equal(named.promptSuffix, '[TOOL_CALLS]');
  t.equal(named.inCall, true);
  t.match(JSON.parse(named.guide!.guided.guide!), { items: { properties: { name: { const: 'get_weather' } } } }, 'named: only that tool');
  t.same(planTools(readToolRequest({ tools: [tool('a')] }), 'hermes').templateTools, [{ type: 'function', function: { name: 'a', parameters: { type: 'object', properties: {} } } }], 'no parameters: an empty object for the template');
});

t.test('a choice\'s calls as OpenAI deltas and message: ids, index, arguments; parallel_tool_calls false keeps one', async (t) => {
  let n = 0;
  const ids = () => `call_${++n}`;
  const plan = planTools(readToolRequest({ tools: [tool('f'), tool('g')] }), 'hermes');
  const out = new ChoiceToolCalls(plan, ids);
  const events = [...out.push('Hi. <tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'), ...out.push('<tool_call>{"name": "g"}</tool_call>'), ...out.finish()];
  t.same(events, [
    { content: 'Hi.' },
    { toolCall: { index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '' } } },
    { toolCall: { index: 0, function: { arguments: '{"a":1}' } } },
    { toolCall: { index: 1, id: 'call_2', type: 'function', function: { name: 'g', arguments: '' } } },
    { toolCall: { index: 1, function: { arguments: '{}' } } },
  ]);
  t.ok(out.called);
  t.same(out.message(), {
    role: 'assistant', content: 'Hi.',
    tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }, { id: 'call_2', type: 'function', function: { name: 'g', arguments: '{}' } }],
  });
  const single = new ChoiceToolCalls(planTools(readToolRequest({ tools: [tool('f'), tool('g')], parallel_tool_calls: false }), 'hermes'), ids);
  single.push('<tool_call>{"name": "f"}</tool_call><tool_call>{"name": "g"}</tool_call>');
  single.finish();
  t.same(single.message().tool_calls?.map((c) => c.function.name), ['f'], 'only the first call');
  const plain = new ChoiceToolCalls(planTools(readToolRequest({}), 'hermes'));
  t.same([...plain.push('<tool_call>{"name": "f"}</tool_call>'), ...plain.finish()], [{ content: '<tool_call>{"name": "f"}</tool_call>' }], 'no tools: all content');
  t.same(plain.message(), { role: 'assistant', content: '<tool_call>{"name": "f"}</tool_call>' });
  t.notOk(plain.called);
  const callOnly = new ChoiceToolCalls(plan, ids);
  callOnly.push('<tool_call>{"name": "f"}</tool_call>');
  callOnly.finish();
  t.equal(callOnly.message().content, null, 'only a call: content null');
});
