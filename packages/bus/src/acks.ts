import type { JsMsg } from '@nats-io/jetstream';

/**
 * Acks confirmed together. `ack(m)` resolves once the server has processed m's ack, like
 * `m.ackAck()`, but the acks that become ready in one turn of the event loop share one
 * confirmation per consumer: every one but the last is sent as a plain ack, the last asks the
 * server to answer. nats-server queues one consumer's acks and works through them in the order
 * they arrived on the connection, so its answer to the last says the ones before it are done too.
 * A confirmed ack costs a request (a reply subscription, a timer, a round trip); a batch of 32
 * paid 32 of them before.
 *
 * If the confirmation fails (the broker is away), every ack of its group rejects: the caller
 * treats it as it treated a failed ackAck, and a message whose ack did arrive is not redelivered.
 */
export function ackGroups(): (m: JsMsg) => Promise<void> {
  type Waiting = { m: JsMsg; resolve: () => void; reject: (err: unknown) => void };
  let waiting: Waiting[] = [];
  let scheduled = false;

  function send(): void {
    scheduled = false;
    const all = waiting;
    waiting = [];
    const byConsumer = new Map<string, Waiting[]>();
    for (const w of all) {
      const c = w.m.info.consumer;
      const g = byConsumer.get(c);
      if (g) g.push(w);
      else byConsumer.set(c, [w]);
    }
    for (const group of byConsumer.values()) {
      const sent: Waiting[] = [];
      const last = group.pop()!;
      for (const w of group) {
        try {
          w.m.ack();
          sent.push(w);
        } catch (err) {
          // The connection is closing: this one comes back after its ack wait.
          w.reject(err);
        }
      }
      sent.push(last);
      last.m.ackAck().then(
        () => sent.forEach((w) => w.resolve()),
        (err: unknown) => sent.forEach((w) => w.reject(err)),
      );
    }
  }

  return (m) =>
    new Promise<void>((resolve, reject) => {
      waiting.push({ m, resolve, reject });
      if (!scheduled) {
        scheduled = true;
        // After the I/O callbacks of this turn: the publish acks of a batch arrive together, and
        // so do the acks of the messages they finish.
        setImmediate(send);
      }
    });
}
