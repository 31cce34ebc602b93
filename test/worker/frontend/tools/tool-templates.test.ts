// The tool-call family a chat template teaches, read from its text; and the template rendered with tools and an
// earlier call's messages the way Hugging Face's apply_chat_template passes them (tools: a list of
// {type: "function", function} or None; a call's arguments as an object; a tool result's tool_call_id and name).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import t from 'tap';

import { readMessages } from '../../../../worker/frontend/chat-messages.js';
import { chatTemplate, loadChatTemplate } from '../../../../worker/frontend/chat-template.js';
import { HttpError } from '../../../../worker/frontend/http-errors.js';
import { detectToolFamily } from '../../../../worker/frontend/tools/tool-family.js';
import { templateTools } from '../../../../worker/frontend/tools/tool-request.js';

// Short templates in each family's style: the markers and variables the real ones use.
const HERMES = `{%- if tools %}<|im_start|>system
# Tools
<tools>{% for tool in tools %}
{{ tool | tojson }}{% endfor %}
</tools>
Return each call as <tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% endif %}{%- for message in messages %}{%- if message.role == "assistant" and message.tool_calls %}<|im_start|>assistant{% for tool_call in message.tool_calls %}
<tool_call>
{"name": "{{ tool_call.function.name }}", "arguments": {{ tool_call.function.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% elif message.role == "tool" %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`;

const LLAMA3 = `{{- bos_token }}{%- if not tools is defined %}{%- set tools = none %}{%- endif %}<|start_header_id|>system<|end_header_id|>

{% if tools is not none %}Environment: ipython
Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.
{% for t in tools %}{{ t | tojson }}
{% endfor %}{% endif %}<|eot_id|>{%- for message in messages %}{%- if 'tool_calls' in message %}<|start_header_id|>assistant<|end_header_id|>

{%- set tool_call = message.tool_calls[0].function %}{"name": "{{ tool_call.name }}", "parameters": {{ tool_call.arguments | tojson }}}<|eot_id|>{%- elif message.role == "tool" %}<|start_header_id|>ipython<|end_header_id|>

{{ message.content }}<|eot_id|>{%- else %}<|start_header_id|>{{ message.role }}<|end_header_id|>

{{ message.content }}<|eot_id|>{%- endif %}{%- endfor %}{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}`;

const MISTRAL = `{{ bos_token }}{% for message in messages %}{% if message.role == 'user' %}{% if tools and loop.last %}[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]{% endif %}[INST]{{ message.content }}[/INST]{% elif message.tool_calls %}[TOOL_CALLS][{% for c in message.tool_calls %}{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}, "id": "{{ c.id }}"}{% if not loop.last %}, {% endif %}{% endfor %}]{{ eos_token }}{% elif message.role == 'tool' %}[TOOL_RESULTS]{"call_id": "{{ message.tool_call_id }}", "content": {{ message.content | tojson }}}[/TOOL_RESULTS]{% else %}{{ message.content }}{{ eos_token }}{% endif %}{% endfor %}`;

const PLAIN = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";
const LLAMA3_NO_TOOLS = "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] }}<|eot_id|>{% endfor %}";

const tokens = { bos: '<s>', eos: '</s>' };
const tools = templateTools([{ name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }]);
const history = readMessages([
  { role: 'user', content: 'Weather in Paris?' },
  { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
  { role: 'tool', tool_call_id: 'call_1', content: '18 C' },
]);

t.test('the family from the template text; a template without tool syntax gets Hermes', async (t) => {
  t.equal(detectToolFamily(HERMES), 'hermes');
  t.equal(detectToolFamily(LLAMA3), 'llama3_json');
  t.equal(detectToolFamily('{{ "<|python_tag|>" }}'), 'llama3_json');
  t.equal(detectToolFamily(MISTRAL), 'mistral');
  t.equal(detectToolFamily(PLAIN), 'hermes', 'no tool syntax: the default');
  t.equal(detectToolFamily(LLAMA3_NO_TOOLS), 'hermes', 'Llama 3.0 headers without tool syntax');
  t.equal(detectToolFamily(undefined), 'hermes');
  t.equal(chatTemplate(MISTRAL, tokens, 'x').toolFamily, 'mistral', 'a loaded template knows its family');
});

t.test('messages: tool_calls arguments parsed into objects; a tool result gets its function name', async (t) => {
  t.same(history[1], { role: 'assistant', content: '', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris' } } }] });
  t.same(history[2], { role: 'tool', content: '18 C', tool_call_id: 'call_1', name: 'get_weather' });
  t.notOk('tool_calls' in history[0]!, 'no tool_calls key on messages without calls (templates test `in`)');
  const bad = (messages: unknown[], pattern: RegExp) => {
    try {
      readMessages(messages);
      t.fail(`expected a 400 matching ${pattern}`);
    } catch (error) {
      t.ok(error instanceof HttpError && error.status === 400 && pattern.test(error.message), `${pattern} (${(error as Error).message})`);
    }
  };
  const call = (args: unknown) => [{ role: 'assistant', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: args } }] }];
  bad(call('{"city": '), /messages\[0\]\.tool_calls\[0\]\.function\.arguments must be a JSON object as text.*got "\{\\"city\\": " \(string\)/);
  bad(call('[1]'), /arguments must be a JSON object/);
  bad([{ role: 'assistant', tool_calls: [{ type: 'function', function: { name: 'f', arguments: '{}' } }] }], /messages\[0\]\.tool_calls\[0\]\.id must be a non-empty string/);
  bad([{ role: 'assistant', tool_calls: [{ id: 'c', function: { arguments: '{}' } }] }], /tool_calls\[0\]\.function\.name must be a non-empty string/);
  bad([{ role: 'assistant', tool_calls: 'x' }], /messages\[0\]\.tool_calls must be an array/);
  bad([{ role: 'user', content: 'x', tool_calls: [] }], /messages\[0\]\.tool_calls is only for assistant messages/);
  bad([{ role: 'tool', content: 'x' }], /messages\[0\]\.tool_call_id must be the id of the call/);
  t.same(readMessages(call({ a: 1 }))[0]!.tool_calls![0]!.function.arguments, { a: 1 }, 'arguments already an object are kept');
});

t.test('rendering: tools and earlier calls in each family', async (t) => {
  const hermes = chatTemplate(HERMES, tokens, 'hermes').render(history, true, tools);
  t.match(hermes, /<tools>\n?\{"type": "function", "function": \{"name": "get_weather", "description": "Weather in a city", "parameters": \{"type": "object"/, 'tools listed (tojson writes as Python\'s json.dumps does)');
  t.match(hermes, /<tool_call>\n\{"name": "get_weather", "arguments": \{"city": "Paris"\}\}\n<\/tool_call>/, 'the earlier call with its arguments object');
  t.match(hermes, /<tool_response>\n18 C\n<\/tool_response>/);
  t.ok(hermes.endsWith('<|im_start|>assistant\n'));
  t.notMatch(chatTemplate(HERMES, tokens, 'hermes').render([history[0]!], true), /<tools>/, 'no tools: tools is None');
  const llama = chatTemplate(LLAMA3, tokens, 'llama').render(history, true, tools);
  t.match(llama, /Environment: ipython/);
  t.match(llama, /\{"name": "get_weather", "parameters": \{"city": "Paris"\}\}<\|eot_id\|>/);
  t.match(llama, /<\|start_header_id\|>ipython<\|end_header_id\|>\n\n18 C/);
  t.notMatch(chatTemplate(LLAMA3, tokens, 'llama').render([history[0]!], true), /ipython/, 'no tools: none, as HF passes');
  const mistral = chatTemplate(MISTRAL, tokens, 'mistral').render(history, true, tools);
  t.match(mistral, /\[TOOL_CALLS\]\[\{"name": "get_weather", "arguments": \{"city": "Paris"\}, "id": "call_1"\}\]<\/s>/);
  t.match(mistral, /\[TOOL_RESULTS\]\{"call_id": "call_1", "content": "18 C"\}\[\/TOOL_RESULTS\]/);
});

t.test('a checkpoint with named templates uses "tool_use" for requests with tools, as apply_chat_template does', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tool-use-template-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({
    bos_token: '<s>', eos_token: { content: '</s>' },
    chat_template: [{ name: 'default', template: PLAIN }, { name: 'tool_use', template: HERMES }],
  }));
  const template = loadChatTemplate(dir)!;
  t.equal(template.toolFamily, 'hermes');
  t.equal(template.render([history[0]!], true), 'user: Weather in Paris?\nassistant:', 'no tools: default');
  t.match(template.render([history[0]!], true, tools), /<tools>/, 'tools: tool_use');
});
