// A live pane's data source: follows the active cluster, polls one endpoint, says in one line
// what it shows (or why not), and backs off on errors instead of flooding them.
import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import { ICluster } from '../api';
import { ClusterStore } from '../model';
import { ILiveReply, liveAPI } from './api';

const MAX_BACKOFF_MS = 30000;
/** How long the line keeps saying that the active cluster changed. */
const CHANGE_NOTICE_MS = 60000;

/** ok: data is live; idle: nothing to show (no active cluster, cluster not running);
 * error: the last read failed (the poll backs off). */
export type LiveState = 'ok' | 'idle' | 'error';

export interface ILiveStatus {
  state: LiveState;
  text: string;
}

function clock(epochSeconds: number): string {
  return new Date(epochSeconds * 1000).toLocaleTimeString();
}

export abstract class LiveSource<R extends ILiveReply> {
  constructor(
    protected readonly store: ClusterStore,
    /** The endpoint under /live/ and the pane's name in sentences ("the task stream"). */
    readonly endpoint: string,
    readonly what: string,
    intervalMs: number
  ) {
    this._unwatch = store.watch();
    store.changed.connect(this._onStore, this);
    this._poll = new Poll({
      auto: false,
      factory: () => this._tick(),
      frequency: { interval: intervalMs, backoff: true, max: MAX_BACKOFF_MS },
      name: `eugo:live-${endpoint}`,
      standby: () => (this._visible ? 'when-hidden' : true)
    });
    void this._poll.start();
  }

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** The cluster the pane shows: the active one, or null. */
  get cluster(): ICluster | null {
    return this._cluster;
  }

  get status(): ILiveStatus {
    return this._status;
  }

  /** Server seconds minus browser seconds, from the last reply. */
  get clockOffset(): number {
    return this._offset;
  }

  /** The server's clock now, in epoch seconds. */
  serverNow(): number {
    return Date.now() / 1000 + this._offset;
  }

  get isDisposed(): boolean {
    return this._poll.isDisposed;
  }

  setVisible(visible: boolean): void {
    this._visible = visible;
    if (visible) {
      void this._poll.refresh();
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._unwatch();
    this.store.changed.disconnect(this._onStore, this);
    this._poll.dispose();
    Signal.clearData(this);
  }

  /** Drop everything shown: the cluster changed or stopped. */
  protected abstract reset(): void;

  /** Take one reply from a running cluster into the pane's bounded state. */
  protected abstract ingest(reply: R): void;

  /** The query of the next request (a cursor, a limit). */
  protected query(): Record<string, string | number | undefined> {
    return {};
  }

  /** What the line adds after the cluster's name while data is live ("12 tasks"). */
  protected summary(reply: R): string {
    return '';
  }

  /** True where the pane's body shows the server's message itself (the GPUs' "no GPU"). */
  protected showsMessage = false;

  protected emit(): void {
    this._changed.emit();
  }

  private _active(): ICluster | null {
    return this.store.clusters.find(c => c.active) ?? null;
  }

  private _onStore(): void {
    // Follow the active cluster at once, not at the next tick.
    if ((this._active()?.id ?? null) !== (this._cluster?.id ?? null)) {
      void this._poll.refresh();
    }
  }

  private _follow(active: ICluster | null): void {
    const before = this._cluster;
    if ((active?.id ?? null) === (before?.id ?? null)) {
      this._cluster = active; // a newer model of the same cluster
      return;
    }
    if (before) {
      this._changedFrom = before.name;
    }
    // The note runs for a minute from when the pane shows the new cluster (or none).
    this._changedAt = Date.now();
    this._cluster = active;
    this._errors = 0;
    this.reset();
  }

  private _changeNote(): string {
    return this._changedFrom && Date.now() - this._changedAt < CHANGE_NOTICE_MS
      ? ` (the active cluster changed from ${this._changedFrom})`
      : '';
  }

  private _set(state: LiveState, text: string): void {
    this._status = { state, text };
    this.emit();
  }

  private async _tick(): Promise<void> {
    const active = this._active();
    this._follow(active);
    if (!active) {
      const gone = this._changedFrom
        ? `${this._changedFrom} is no longer active and no other cluster is. `
        : 'No cluster is active. ';
      this._set(
        'idle',
        this.store.loadError
          ? `Could not list the clusters: ${this.store.loadError}`
          : `${gone}Make one active in the EugoHPC Manager (Make active on its card) and this pane follows it.`
      );
      return;
    }
    let reply: R;
    try {
      reply = await liveAPI<R>(active.id, this.endpoint, this.query());
    } catch (error) {
      if (this._cluster?.id !== active.id) {
        return; // the cluster changed while the request was out
      }
      this._errors++;
      const message = error instanceof Error ? error.message : String(error);
      const tries = this._errors === 1 ? '' : ` (${this._errors} tries)`;
      this._set(
        'error',
        `Could not read ${this.what} of ${active.name}${tries}: ${message}. Trying again less often.`
      );
      throw error; // the poll backs off on a rejection
    }
    if (this._cluster?.id !== active.id) {
      return;
    }
    this._errors = 0;
    this._offset = reply.now - Date.now() / 1000;
    if (reply.status !== 'running') {
      this.reset();
      this._set(
        'idle',
        `${active.name} is ${reply.status}${this._changeNote()}: ${reply.message ?? 'nothing to show until it runs.'}`
      );
      return;
    }
    this.ingest(reply);
    // A running cluster may still have a word to say (a read of Ray failed, a ray:// address).
    const parts = [this.summary(reply)];
    if (reply.message && !this.showsMessage) {
      parts.push(reply.message);
    }
    parts.push(`updated ${clock(reply.now)}`);
    this._set(
      'ok',
      `${active.name}${this._changeNote()} · ${parts.filter(p => p).join(' · ')}`
    );
  }

  private _changed = new Signal<this, void>(this);
  private _changedAt = 0;
  /** The name of the cluster followed before the last change. */
  private _changedFrom: string | null = null;
  private _cluster: ICluster | null = null;
  private _errors = 0;
  private _offset = 0;
  private _poll: Poll;
  private _status: ILiveStatus = { state: 'idle', text: 'Loading…' };
  private _unwatch: () => void;
  private _visible = false;
}
