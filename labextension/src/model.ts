// The panel's state: the cluster list, refreshed by a poll that backs off and sleeps while hidden.
import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import { ICluster, listClusters } from './api';

/** Milliseconds between polls while something is changing, and while all is steady. */
const FAST_MS = 1500;
const STEADY_MS = 4000;
const MAX_BACKOFF_MS = 60000;

export class ClusterStore {
  constructor() {
    this._poll = new Poll({
      auto: false,
      factory: () => this._fetch(),
      frequency: { interval: FAST_MS, backoff: true, max: MAX_BACKOFF_MS },
      name: 'eugo:clusters',
      // While the sidebar is collapsed no request is made; while the browser tab is hidden
      // neither. The poll resumes at once when either is visible again.
      // Open live panes (watchers) need the active cluster too, sidebar or not.
      standby: () =>
        this._visible || this._watchers > 0 ? 'when-hidden' : true
    });
  }

  /** Emitted whenever clusters, the load error or the busy set change. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get clusters(): readonly ICluster[] {
    return this._clusters;
  }

  /** The last failure to reach the server, cleared by the next success. */
  get loadError(): string | null {
    return this._loadError;
  }

  /** True until the first answer (or failure) arrives. */
  get loading(): boolean {
    return this._loading;
  }

  get isDisposed(): boolean {
    return this._poll.isDisposed;
  }

  find(id: string): ICluster | undefined {
    return this._clusters.find(c => c.id === id);
  }

  /** Ids with a user action (shut down, activate) in flight: their buttons are disabled. */
  isBusy(id: string): boolean {
    return this._busy.has(id);
  }

  setBusy(id: string, busy: boolean): void {
    if (busy) {
      this._busy.add(id);
    } else {
      this._busy.delete(id);
    }
    this._changed.emit();
  }

  /** Put a model the server just returned in place, before the next poll. */
  upsert(cluster: ICluster): void {
    const unmark = (c: ICluster) =>
      cluster.active ? { ...c, active: false } : c;
    const index = this._clusters.findIndex(c => c.id === cluster.id);
    const clusters = this._clusters.map(unmark);
    if (index < 0) {
      clusters.push(cluster);
    } else {
      clusters[index] = cluster;
    }
    this._clusters = clusters;
    this._changed.emit();
    void this.refresh();
  }

  remove(id: string): void {
    this._clusters = this._clusters.filter(c => c.id !== id);
    this._changed.emit();
    void this.refresh();
  }

  /** Start polling; returns at once (never holds up JupyterLab's start). */
  start(): void {
    void this._poll.start();
  }

  setVisible(visible: boolean): void {
    this._visible = visible;
    if (visible) {
      void this.refresh();
    }
  }

  /** Keep polling while the sidebar is collapsed, until the returned function is called: a
   * live pane follows the active cluster through this store. */
  watch(): () => void {
    this._watchers++;
    void this.refresh();
    let done = false;
    return () => {
      if (!done) {
        done = true;
        this._watchers--;
      }
    };
  }

  refresh(): Promise<void> {
    if (this._poll.isDisposed) {
      return Promise.resolve();
    }
    return this._poll
      .refresh()
      .then(() => this._poll.tick)
      .then(() => undefined)
      .catch(() => undefined);
  }

  dispose(): void {
    this._poll.dispose();
    Signal.clearData(this);
  }

  private async _fetch(): Promise<void> {
    try {
      const clusters = await listClusters();
      this._clusters = clusters;
      this._loadError = null;
      const changing = clusters.some(
        c => c.status === 'starting' || c.status === 'stopping'
      );
      // Work in motion is worth watching closely; a request no node can run is not.
      const busy = clusters.some(
        c => c.tasks.running > 0 || c.waiting.some(w => !w.infeasible)
      );
      const interval = changing || busy ? FAST_MS : STEADY_MS;
      if (this._poll.frequency.interval !== interval) {
        this._poll.frequency = { ...this._poll.frequency, interval };
      }
    } catch (error) {
      this._loadError = (error as Error).message || String(error);
      throw error; // the poll backs off on a rejection
    } finally {
      this._loading = false;
      this._changed.emit();
    }
  }

  private _clusters: ICluster[] = [];
  private _busy = new Set<string>();
  private _changed = new Signal<this, void>(this);
  private _loadError: string | null = null;
  private _loading = true;
  private _poll: Poll;
  private _visible = false;
  private _watchers = 0;
}
