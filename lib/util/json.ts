// A JSON object as parsed JSON gives it: not null, not an array.

export type JsonObject = Record<string, unknown>;

/** Whether `v` is a JSON object (a non-null, non-array object). */
export function isJsonObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
