// The bench's multi-turn traffic (pure): N conversations of T turns, to measure what prefix reuse and
// KV-cache-aware routing buy. Turn k's prompt is the conversation's system prompt (one per group of
// conversations), every earlier turn's user message and the answer the server actually returned, then a new user
// message — so turn k can only be built, and is only sent, once turn k − 1's answer has arrived.
import { intKind, numberKind, type ValueKind } from '../../worker/options/value-kinds.js';
import { ToolError } from '../client/tool-error.js';
import { normal, seededRandom } from './random.js';

export interface ConversationTraffic {
  numConversations: number;
  numTurns: number;
  systemPromptLen: number;                          // tokens; 0: no system prompt
  conversationsPerSystemPrompt?: number | undefined; // consecutive conversations sharing one; undefined: all of them
  inputMean: number;                                // user message length, tokens
  inputStdev: number;
  outputMean: number;
  outputStdev: number;
  vocabSize: number;
  seed: number;
}

export interface ConversationTurn {
  user: number[];        // the new user message's token ids
  outputLen: number;
}

export interface Conversation {
  index: number;
  systemPromptGroup: number;
  systemPrompt: number[];  // the same array for every conversation of its group
  turns: ConversationTurn[];
}

/** One turn as it is sent: its whole prompt, and how much of it no earlier request had (a perfect prefix cache's work). */
export interface TurnRequest {
  conversation: number;
  turn: number;            // from 0
  inputIds: number[];
  outputLen: number;
  newInputTokens: number;
}

// Programmatic callers (runBench, the tests) get the words the command line's parsers use.
function check<T>(flag: string, kind: ValueKind<T>, value: unknown): void {
  const checked = kind.fromFile(value);
  if (!checked.ok) throw new ToolError(`${flag} ${checked.rule}, got ${typeof value === 'string' ? JSON.stringify(value) : String(value)}`);
}

export function checkConversationTraffic(d: ConversationTraffic): void {
  check('--num-conversations', intKind(1), d.numConversations);
  check('--num-turns', intKind(1), d.numTurns);
  check('--system-prompt-len', intKind(0), d.systemPromptLen);
  if (d.conversationsPerSystemPrompt !== undefined) {
    check('--conversations-per-system-prompt', intKind(1), d.conversationsPerSystemPrompt);
    if (d.systemPromptLen === 0) {
      throw new ToolError(`--conversations-per-system-prompt ${d.conversationsPerSystemPrompt} needs a system prompt: pass --system-prompt-len <n> (n >= 1)`);
    }
  }
  check('--input-mean', numberKind(1), d.inputMean);
  check('--input-stdev', numberKind(0), d.inputStdev);
  check('--output-mean', numberKind(1), d.outputMean);
  check('--output-stdev', numberKind(0), d.outputStdev);
  check('--vocab-size', intKind(1), d.vocabSize);
  check('--seed', intKind(0), d.seed);
}

// At least one token either way, as token-norm-dist: an empty message or answer is not a request the server accepts.
const length = (random: () => number, mean: number, stdev: number) => Math.max(1, Math.round(normal(random, mean, stdev)));

/** The conversations' fixed parts (system prompts, user messages, output lengths); the same seed, the same traffic. */
export function multiTurnConversations(d: ConversationTraffic): Conversation[] {
  checkConversationTraffic(d);
  const random = seededRandom(d.seed);
  const ids = (n: number) => Array.from({ length: n }, () => Math.floor(random() * d.vocabSize));
  const perGroup = Math.min(d.conversationsPerSystemPrompt ?? d.numConversations, d.numConversations);
  const systemPrompts = Array.from({ length: Math.ceil(d.numConversations / perGroup) }, () => ids(d.systemPromptLen));
  return Array.from({ length: d.numConversations }, (_, index) => {
    const group = Math.floor(index / perGroup);
    const turns = Array.from({ length: d.numTurns }, () => {
      const userLen = length(random, d.inputMean, d.inputStdev);
      const outputLen = length(random, d.outputMean, d.outputStdev);
      return { user: ids(userLen), outputLen };
    });
    return { index, systemPromptGroup: group, systemPrompt: systemPrompts[group]!, turns };
  });
}

/**
 * Plays one conversation, one turn after the other: `ask` sends a turn and resolves with the answer's token ids, or
 * undefined when the request failed (the conversation ends there: its next prompt would need that answer).
 * `sentGroups` holds the system-prompt groups some earlier request already carried, shared by every conversation of
 * a run, so a turn's new tokens exclude a system prompt another conversation sent first. Resolves with the turns sent.
 */
export async function playConversation(
  c: Conversation, sentGroups: Set<number>, ask: (turn: TurnRequest) => Promise<number[] | undefined>,
): Promise<number> {
  let context = c.systemPrompt;
  let cached = sentGroups.has(c.systemPromptGroup) ? c.systemPrompt.length : 0;
  sentGroups.add(c.systemPromptGroup);
  for (const [k, turn] of c.turns.entries()) {
    const inputIds = [...context, ...turn.user];
    const answer = await ask({ conversation: c.index, turn: k, inputIds, outputLen: turn.outputLen, newInputTokens: inputIds.length - cached });
    if (answer === undefined) return k + 1;
    context = [...inputIds, ...answer];
    cached = context.length;
  }
  return c.turns.length;
}
