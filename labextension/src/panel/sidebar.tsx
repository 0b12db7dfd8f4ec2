// The left sidebar widget: header, launch and connect forms, and one card per cluster.
import { ReactWidget, UseSignal } from '@jupyterlab/apputils';
import { refreshIcon, ToolbarButtonComponent } from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import { Message } from '@lumino/messaging';
import * as React from 'react';

import {
  IKindInfo,
  IProfile,
  launchKinds,
  listKinds,
  listProfiles
} from '../api';
import { CommandIDs } from '../commands';
import { eugoIcon } from '../icon';
import { ClusterStore } from '../model';
import { ClusterCard } from './card';
import { ConnectForm } from './connect';
import { BatchForm } from './batch';
import { LaunchForm } from './launch';
import { SshLaunchForm } from './ssh';

export const SIDEBAR_ID = 'eugo-hpc-manager';

export class ClusterSidebar extends ReactWidget {
  constructor(
    private readonly _store: ClusterStore,
    private readonly _commands: CommandRegistry
  ) {
    super();
    this.id = SIDEBAR_ID;
    this.addClass('eugo-Sidebar');
    this.title.icon = eugoIcon;
    this.title.caption = 'EugoHPC Manager';
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._store.setVisible(true);
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    this._store.setVisible(false);
  }

  render(): JSX.Element {
    return (
      <UseSignal signal={this._store.changed} initialSender={this._store}>
        {() => <SidebarBody store={this._store} commands={this._commands} />}
      </UseSignal>
    );
  }
}

interface IBodyProps {
  store: ClusterStore;
  commands: CommandRegistry;
}

/** Launch on this machine or as a batch scheduler's jobs: one section, the form of the kind
 * chosen, as the server declares it (`GET /eugo/kinds`). */
function LaunchSection({
  commands,
  open
}: {
  commands: CommandRegistry;
  open: boolean;
}) {
  const [where, setWhere] = React.useState<string>('');
  const [profiles, setProfiles] = React.useState<IProfile[]>([]);
  const [kinds, setKinds] = React.useState<Record<string, IKindInfo>>({});
  const [kindsError, setKindsError] = React.useState('');
  React.useEffect(() => {
    // Profiles come from the server's configuration; none (or an older server) is fine.
    listProfiles().then(setProfiles, () => setProfiles([]));
    // The kinds and their forms; "This job's nodes" only where the server runs inside a job.
    listKinds().then(setKinds, error =>
      setKindsError(error instanceof Error ? error.message : String(error))
    );
  }, []);
  const offered = launchKinds(kinds);
  const chosen = offered.find(k => k.kind === where) ?? offered[0];
  return (
    <details className="eugo-Section" open={open}>
      <summary className="eugo-Section-title">Launch a cluster</summary>
      <div
        className="eugo-KindSwitch"
        role="radiogroup"
        aria-label="Where to launch"
      >
        {offered.map(({ kind, form }) => (
          <label
            key={kind}
            className={`eugo-KindSwitch-option ${chosen?.kind === kind ? 'eugo-mod-selected' : ''}`}
          >
            <input
              type="radio"
              name="eugo-launch-kind"
              value={kind}
              checked={chosen?.kind === kind}
              onChange={() => setWhere(kind)}
            />
            {form.label}
          </label>
        ))}
      </div>
      {kindsError && (
        <div className="eugo-Notice eugo-mod-error" role="status">
          Cannot list the kinds of cluster: {kindsError}
        </div>
      )}
      {chosen?.form.widget === 'nodes' && <LaunchForm commands={commands} />}
      {chosen?.form.widget === 'fields' && (
        <BatchForm
          key={chosen.kind}
          commands={commands}
          profiles={profiles}
          kind={chosen.kind}
          form={chosen.form}
        />
      )}
    </details>
  );
}

function SidebarBody({ store, commands }: IBodyProps): JSX.Element {
  const clusters = store.clusters;
  return (
    <div className="eugo-Sidebar-body">
      <header className="eugo-Sidebar-header">
        <eugoIcon.react tag="span" className="eugo-Sidebar-logo" />
        <h2 className="eugo-Sidebar-title">EugoHPC Manager</h2>
        <ToolbarButtonComponent
          icon={refreshIcon}
          tooltip="Refresh now"
          onClick={() => void commands.execute(CommandIDs.refresh)}
        />
      </header>
      {store.loadError && (
        <div className="eugo-Notice eugo-mod-error" role="status">
          Cannot list clusters: {store.loadError}. Retrying with backoff.
        </div>
      )}
      <LaunchSection commands={commands} open={clusters.length === 0} />
      <details className="eugo-Section">
        <summary className="eugo-Section-title">Launch on SSH hosts</summary>
        <SshLaunchForm commands={commands} />
      </details>
      <details className="eugo-Section">
        <summary className="eugo-Section-title">Connect to a cluster</summary>
        <ConnectForm commands={commands} />
      </details>
      <section className="eugo-ClusterList" aria-label="Clusters">
        <h3 className="eugo-Section-heading">Clusters</h3>
        {store.loading && clusters.length === 0 && (
          <p className="eugo-Empty">Loading clusters…</p>
        )}
        {!store.loading && clusters.length === 0 && (
          <p className="eugo-Empty">
            No cluster yet. Launch one above, or notebooks use an embedded local
            Ray.
          </p>
        )}
        {clusters.map(cluster => (
          <ClusterCard
            key={cluster.id}
            cluster={cluster}
            busy={store.isBusy(cluster.id)}
            commands={commands}
          />
        ))}
      </section>
    </div>
  );
}
