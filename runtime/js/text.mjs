// Text in and out of an rnnx export in JavaScript: the checkpoint's tokenizer and chat template that the export
// carries (rnnx.json "text": tokenizer.json, chat_template.jinja; docs/checkpoints.md, "Text"), read with
// @huggingface/tokenizers and rendered with @huggingface/jinja, as rnnx.runtime.text does in Python with tokenizers
// and jinja2: the same ids for the same text, the same chat turn, the same decoded replies.
//
// Like rnnx.mjs it imports nothing: the caller passes the two packages' classes in, so the same file serves Node
// (createRequire(...)('@huggingface/tokenizers')) and the browser (an import of their ES modules).
//
//   const libs = { Tokenizer, Template };   // from @huggingface/tokenizers and @huggingface/jinja
//   const text = await RnnxText.open(dir, model.metadata, fs, libs);   // browser: RnnxText.fetch(url, model.metadata, libs)
//   const ids = text.encodeChat([{ role: 'user', content: 'Hi' }]);   // text.encode('Hi') for plain text
//   const reply = text.decode(newTokens);                              // stop at text.eosTokenIds

import { RnnxError } from './rnnx.mjs';

/** The hex SHA-256 of `bytes` (Web Crypto: Node >= 19 and browsers on https or localhost). */
async function sha256(bytes) {
  const digest = new Uint8Array(await globalThis.crypto.subtle.digest('SHA-256', bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

export class RnnxText {
  /**
   * `record`: rnnx.json's "text"; `tokenizerJson`: tokenizer.json parsed; `template`: the chat template's text or
   * null; `libs`: {Tokenizer, Template}. Use open / fetch, which read and check the files.
   */
  constructor(record, tokenizerJson, template, { Tokenizer, Template }) {
    // The special tokens' text is the tokenizer config tokenizers.js reads; the export keeps it in rnnx.json.
    this.tokenizer = new Tokenizer(tokenizerJson, {
      bos_token: record.bos_token, eos_token: record.eos_token, clean_up_tokenization_spaces: false,
    });
    this.record = record;
    /** Token ids that end a generation (the checkpoint's eos ids). */
    this.eosTokenIds = (record.eos_token_ids ?? []).map(Number);
    this.chatTemplate = template === null ? null : new Template(template);
  }

  /** From the bytes of the two files; `where` names the tokenizer in errors. */
  static async #make(record, bytes, template, libs, where) {
    if (await sha256(bytes) !== record.tokenizer_sha256) {
      throw new RnnxError(`${where}: sha256 does not match rnnx.json; the tokenizer was replaced`);
    }
    let json;
    try {
      json = JSON.parse(new TextDecoder().decode(bytes));
    } catch (error) {
      throw new RnnxError(`${where}: not JSON (${error.message.split('\n')[0]})`);
    }
    return new RnnxText(record, json, template, libs);
  }

  /** Node.js: the text of the export in `dir` (its rnnx.json `metadata`), read with `fs`; null without one. */
  static async open(dir, metadata, fs, libs) {
    const record = metadata.text;
    if (!record) return null;
    const root = dir.replace(/\/$/, '');
    const where = `${root}/${record.tokenizer}`;
    const bytes = await fs.readFile(where).catch(() => {
      throw new RnnxError(`${where}: the tokenizer ${root}/rnnx.json names is missing`);
    });
    const template = record.chat_template ? await fs.readFile(`${root}/${record.chat_template}`, 'utf8') : null;
    return RnnxText.#make(record, new Uint8Array(bytes), template, libs, where);
  }

  /** Browser (or any fetch): the text of the export at URL `base`; null without one. */
  static async fetch(base, metadata, libs, fetchFn = globalThis.fetch) {
    const record = metadata.text;
    if (!record) return null;
    const root = base.endsWith('/') ? base : `${base}/`;
    const where = `${root}${record.tokenizer}`;
    const response = await fetchFn(where);
    if (!response.ok) throw new RnnxError(`${where}: the tokenizer ${root}rnnx.json names is missing (HTTP ${response.status})`);
    let template = null;
    if (record.chat_template) {
      const templateResponse = await fetchFn(`${root}${record.chat_template}`);
      if (!templateResponse.ok) throw new RnnxError(`${root}${record.chat_template}: missing (HTTP ${templateResponse.status})`);
      template = await templateResponse.text();
    }
    return RnnxText.#make(record, new Uint8Array(await response.arrayBuffer()), template, libs, where);
  }

  /** Text -> token ids, with the tokenizer's own special tokens (a BOS where it adds one). */
  encode(text) {
    return this.tokenizer.encode(text).ids;
  }

  /** Token ids -> text, special tokens skipped. */
  decode(ids) {
    return this.tokenizer.decode(ids.map(Number), { skip_special_tokens: true });
  }

  /** The chat template applied to `messages` ([{role, content}]); RnnxError when the export has none. */
  renderChat(messages, addGenerationPrompt = true) {
    if (this.chatTemplate === null) throw new RnnxError("this export's checkpoint had no chat template; give the prompt as text");
    try {
      return this.chatTemplate.render({
        messages, add_generation_prompt: addGenerationPrompt, bos_token: this.record.bos_token ?? '',
        eos_token: this.record.eos_token ?? '',
      }); // @huggingface/jinja defines raise_exception itself
    } catch (error) {
      throw new RnnxError(`chat template: ${error.message.split('\n')[0]}`);
    }
  }

  /** The ids of renderChat (no special tokens added: the template wrote them). */
  encodeChat(messages, addGenerationPrompt = true) {
    return this.tokenizer.encode(this.renderChat(messages, addGenerationPrompt), { add_special_tokens: false }).ids;
  }
}
