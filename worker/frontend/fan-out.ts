// How many engine requests one client request may become: no more than the model's max batch size, as Triton
// refuses a request whose batch exceeds max_batch_size. Checked from the request's shape alone, before any element
// is read or tokenized, so a list of 50,000 prompts costs a count, not 50,000 tokenizations and engine requests.
import { badRequest } from './http-errors.js';
import type { ServingContext } from './serving-context.js';

/** 400 when `size` engine requests exceed the max batch size; `what` says where the size came from. */
export function checkBatch(ctx: Pick<ServingContext, 'maxBatchSize'>, size: number, what: string, param: string): void {
  if (size <= ctx.maxBatchSize) return;
  throw badRequest(`${what} exceeds the model's max batch size ${ctx.maxBatchSize} (--max-batch-size)`, param);
}

/** OpenAI: every prompt runs n times. */
export function checkChoices(ctx: Pick<ServingContext, 'maxBatchSize'>, prompts: number, n: number, param: string): void {
  const total = prompts * n;
  checkBatch(ctx, total, `${prompts} prompt${prompts === 1 ? '' : 's'} × n=${n} = ${total} sequence${total === 1 ? '' : 's'}`, param);
}
