// The OpenAI Node SDK against a running edgellm serve: node sdk.mjs BASE_URL MODEL API_KEY
// Prints one line per check ("ok NAME" or "FAIL NAME: why"); exits 1 if any failed.
import OpenAI from "openai";

const [base, model, key] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + "/v1", apiKey: key, maxRetries: 0 });
let failed = 0;
async function check(name, f) {
  try { await f(); console.log("ok " + name); }
  catch (e) { failed++; console.log("FAIL " + name + ": " + (e && e.stack || e)); }
}
function assert(c, msg) { if (!c) throw new Error(msg); }

await check("models.list", async () => {
  const page = await client.models.list();
  assert(page.data.length === 1 && page.data[0].id === model, JSON.stringify(page.data));
});
await check("models.retrieve", async () => {
  const m = await client.models.retrieve(model);
  assert(m.id === model && m.object === "model", JSON.stringify(m));
});
await check("models.retrieve unknown is NotFoundError", async () => {
  try { await client.models.retrieve("no-such-model"); assert(false, "no error"); }
  catch (e) { assert(e instanceof OpenAI.NotFoundError && e.param === "model", String(e)); }
});
let text;
await check("completions.create", async () => {
  const c = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 12, temperature: 0 });
  text = c.choices[0].text;
  assert(text.length > 0 && c.usage.completion_tokens >= 1 && c.usage.total_tokens === c.usage.prompt_tokens + c.usage.completion_tokens, JSON.stringify(c));
});
await check("completions stream equals non-stream at temperature 0", async () => {
  const s = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 12, temperature: 0, stream: true });
  let t = "";
  for await (const ch of s) t += ch.choices.map(c => c.text).join("");
  assert(t === text, JSON.stringify([t, text]));
});
let reply;
await check("chat.completions.create", async () => {
  const c = await client.chat.completions.create({ model, messages: [{ role: "system", content: "Tell a story." }, { role: "user", content: "Lily had a dog." }], max_tokens: 10, temperature: 0 });
  reply = c.choices[0].message.content;
  assert(c.choices[0].message.role === "assistant" && reply.length > 0 && !reply.startsWith(" "), JSON.stringify(c.choices[0]));
});
await check("chat stream with include_usage", async () => {
  const s = await client.chat.completions.create({ model, messages: [{ role: "system", content: "Tell a story." }, { role: "user", content: "Lily had a dog." }], max_tokens: 10, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let t = "", usage = null;
  for await (const ch of s) { for (const c of ch.choices) t += c.delta.content || ""; if (ch.usage) usage = ch.usage; }
  assert(t === reply && usage && usage.completion_tokens >= 1, JSON.stringify([t, reply, usage]));
});
await check("presence_penalty refused with param", async () => {
  try { await client.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }], presence_penalty: 0.5 }); assert(false, "no error"); }
  catch (e) { assert(e instanceof OpenAI.BadRequestError && e.param === "presence_penalty", String(e)); }
});
await check("type mismatch names the param", async () => {
  try { await client.completions.create({ model, prompt: "a", max_tokens: "ten" }); assert(false, "no error"); }
  catch (e) { assert(e instanceof OpenAI.BadRequestError && e.param === "max_tokens", String(e)); }
});
await check("wrong key is AuthenticationError", async () => {
  const bad = new OpenAI({ baseURL: base + "/v1", apiKey: "wrong", maxRetries: 0 });
  try { await bad.models.list(); assert(false, "no error"); }
  catch (e) { assert(e instanceof OpenAI.AuthenticationError, String(e)); }
});
await check("stop sequence", async () => {
  const c = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 30, temperature: 0, stop: [" a"] });
  assert(!c.choices[0].text.includes(" a") && c.choices[0].finish_reason === "stop", JSON.stringify(c.choices[0]));
});
process.exit(failed ? 1 : 0);
