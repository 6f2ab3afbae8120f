// EdgeLLM.swift — a Swift wrapper sketch over include/edgellm.h.
//
// UNTESTED: no Swift toolchain, macOS or Xcode exists on the project's
// machines; this file has never been compiled. It shows the intended shape
// for an iOS app that links lib/libedgellm.a (make lib-static, built for
// GOOS=ios; docs/ANDROID.md "iOS") and imports the header through a module
// map:
//
//   module CEdgeLLM { header "edgellm.h" link "edgellm" export * }
//
// The header's static inline edgellm_*_init functions import into Swift as
// ordinary functions.

import CEdgeLLM
import Foundation

public enum EdgeLLMError: Error {
    case invalidArgument(String), badHandle(String), structSize(String), io(String)
    case model(String), policy(String), cancelled, contextFull(String), busy(String)
    case tooSmall(String), internalError(String)

    static func check(_ rc: Int32) throws {
        if rc == EDGELLM_OK.rawValue { return }
        let msg = String(cString: edgellm_last_error())
        switch edgellm_status(UInt32(rc)) {
        case EDGELLM_ERR_INVALID_ARGUMENT: throw invalidArgument(msg)
        case EDGELLM_ERR_BAD_HANDLE: throw badHandle(msg)
        case EDGELLM_ERR_STRUCT_SIZE: throw structSize(msg)
        case EDGELLM_ERR_IO: throw io(msg)
        case EDGELLM_ERR_MODEL: throw model(msg)
        case EDGELLM_ERR_POLICY: throw policy(msg)
        case EDGELLM_ERR_CANCELLED: throw cancelled
        case EDGELLM_ERR_CONTEXT_FULL: throw contextFull(msg)
        case EDGELLM_ERR_BUSY: throw busy(msg)
        case EDGELLM_ERR_TOO_SMALL: throw tooSmall(msg)
        default: throw internalError(msg)
        }
    }
}

/// A loaded model. Free its sessions first (deinit order is the app's job).
public final class Engine {
    let handle: edgellm_engine

    public init(path: String) throws {
        var p = edgellm_engine_params()
        edgellm_engine_params_init(&p)
        var h: edgellm_engine = 0
        try path.withCString { cpath in
            p.model_path = cpath
            try EdgeLLMError.check(edgellm_engine_load(&p, &h))
        }
        handle = h
    }

    deinit { _ = edgellm_engine_free(handle) }

    public var chatTemplate: String {
        var mi = edgellm_model_info()
        edgellm_model_info_init(&mi)
        guard edgellm_model_info(handle, &mi) == EDGELLM_OK.rawValue, let t = mi.chat_template else { return "" }
        return String(cString: t)
    }

    public func tokenize(_ text: String, addSpecial: Bool = true) throws -> [Int32] {
        var n: Int32 = 0
        let rc = edgellm_tokenize(handle, text, addSpecial ? 1 : 0, nil, 0, &n)
        if rc != EDGELLM_ERR_TOO_SMALL.rawValue { try EdgeLLMError.check(rc) }
        var toks = [Int32](repeating: 0, count: Int(n))
        try EdgeLLMError.check(edgellm_tokenize(handle, text, addSpecial ? 1 : 0, &toks, n, &n))
        return toks
    }
}

/// One conversation: its KV cache keeps what it was told and said.
public final class Session {
    let handle: edgellm_session
    let engine: Engine // keeps the engine alive while the session is

    public init(engine: Engine, contextLength: Int32 = 0) throws {
        var p = edgellm_session_params()
        edgellm_session_params_init(&p)
        p.n_ctx = contextLength
        var h: edgellm_session = 0
        try EdgeLLMError.check(edgellm_session_new(engine.handle, &p, &h))
        handle = h
        self.engine = engine
    }

    deinit { _ = edgellm_session_free(handle) }

    public func cancel() { _ = edgellm_cancel(handle) }
    public func reset() throws { try EdgeLLMError.check(edgellm_session_reset(handle)) }

    /// Streams whole characters of the continuation of prompt. Runs the
    /// generation on a detached task (never the main thread); cancelling the
    /// stream's consumer cancels the generation.
    public func generate(_ prompt: String, maxTokens: Int32 = 256, temperature: Float = 0.8)
        -> AsyncThrowingStream<String, Error>
    {
        AsyncThrowingStream { continuation in
            final class Box { let c: AsyncThrowingStream<String, Error>.Continuation; init(_ c: AsyncThrowingStream<String, Error>.Continuation) { self.c = c } }
            let box = Unmanaged.passRetained(Box(continuation))
            let h = handle
            continuation.onTermination = { _ in _ = edgellm_cancel(h) }
            Task.detached {
                var p = edgellm_generate_params()
                edgellm_generate_params_init(&p)
                p.n_predict = maxTokens
                p.temperature = temperature
                p.flags = UInt32(EDGELLM_GENERATE_UTF8_COMPLETE)
                let rc: Int32 = prompt.withCString { cprompt in
                    p.prompt = cprompt
                    return edgellm_generate(h, &p, { text, len, _, user in
                        guard let text = text, len > 0 else { return 0 }
                        let box = Unmanaged<Box>.fromOpaque(user!).takeUnretainedValue()
                        let s = String(decoding: UnsafeRawBufferPointer(start: text, count: Int(len)), as: UTF8.self)
                        box.c.yield(s)
                        return 0
                    }, box.toOpaque())
                }
                do {
                    try EdgeLLMError.check(rc)
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
                box.release()
            }
        }
    }
}
