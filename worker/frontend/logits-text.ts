// Logits as JSON numbers: what JSON.stringify writes for them (a float32 as the shortest double that reads back
// exactly, as Triton writes it), non-finite values (a masked logit is -Infinity) as null. Shared by the event loop
// (small tensors) and the frontend thread (large ones, frontend-thread.ts).

export function logitsText(values: Float32Array): string {
  const text = values.join(',');
  return text.includes('N') || text.includes('I') ? text.replace(/-?Infinity|NaN/g, 'null') : text;
}
