// The panel's commands: every button in a cluster card runs one of these with `{ id }`.
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Dialog, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookActions } from '@jupyterlab/notebook';

import {
  activateCluster,
  addNode,
  connectCluster,
  dashboardHref,
  ICluster,
  IConnectRequest,
  ILaunchRequest,
  launchCluster,
  removeNode,
  shutdownCluster
} from './api';
import { ClusterStore } from './model';

export namespace CommandIDs {
  export const open = 'eugo:open-manager';
  export const launch = 'eugo:launch-cluster';
  export const connect = 'eugo:connect-cluster';
  export const shutdown = 'eugo:shutdown-cluster';
  export const activate = 'eugo:activate-cluster';
  export const insertCode = 'eugo:insert-connection-code';
  export const openDashboard = 'eugo:open-dashboard';
  export const refresh = 'eugo:refresh-clusters';
  export const addNode = 'eugo:add-node';
  export const removeNode = 'eugo:remove-node';
  // The live panes (live/commands.ts): each follows the active cluster.
  export const openTaskStream = 'eugo:open-task-stream';
  export const openProgress = 'eugo:open-progress';
  export const openNodes = 'eugo:open-nodes';
  export const openGpus = 'eugo:open-gpus';
  export const openFailures = 'eugo:open-failures';
}

/** The code a notebook runs to use this cluster (what "Insert connection code" inserts). */
export function connectionCode(cluster: ICluster): string {
  return [
    'import eugo_jupyter as eugo',
    '',
    `# ${cluster.name}: ${cluster.kind === 'connect' ? 'connected in' : 'launched from'} the EugoHPC Manager`,
    `eugo.hpc.init(address=${JSON.stringify(cluster.address ?? '')})`
  ].join('\n');
}

/** Show a failed server call in a dialog; the panel itself keeps working. */
export async function reportError(
  title: string,
  error: unknown
): Promise<void> {
  const message = error instanceof Error ? error.message : String(error);
  await showErrorMessage(title, message);
}

export interface ICommandContext {
  app: JupyterFrontEnd;
  store: ClusterStore;
  notebooks: INotebookTracker | null;
  /** Reveals the sidebar. */
  show: () => void;
}

export function addCommands({
  app,
  store,
  notebooks,
  show
}: ICommandContext): void {
  const { commands } = app;
  const idOf = (args: any): string => String(args?.id ?? '');
  const cluster = (args: any): ICluster | undefined => store.find(idOf(args));
  const label = (args: any, verb: string) => {
    const c = cluster(args);
    return c ? `${verb} ${c.name}` : verb;
  };

  // Run a server call for one cluster with its buttons disabled, errors in a dialog.
  const guarded = async <T>(
    id: string,
    title: string,
    call: () => Promise<T>
  ) => {
    store.setBusy(id, true);
    try {
      return await call();
    } catch (error) {
      await reportError(title, error);
      return undefined;
    } finally {
      store.setBusy(id, false);
    }
  };

  commands.addCommand(CommandIDs.open, {
    label: 'Open the EugoHPC Manager',
    caption: 'Launch, monitor and shut down Ray clusters',
    execute: () => show()
  });

  commands.addCommand(CommandIDs.refresh, {
    label: 'Refresh Clusters',
    execute: () => store.refresh()
  });

  commands.addCommand(CommandIDs.launch, {
    label: 'Launch Cluster',
    caption:
      "Start a Ray head and worker nodes on this machine or as a batch scheduler's jobs",
    execute: async args => {
      const request = args as unknown as ILaunchRequest;
      if (!request?.kind) {
        show(); // from the palette: the form is in the sidebar
        return;
      }
      try {
        const model = await launchCluster(request);
        store.upsert(model);
        return model;
      } catch (error) {
        await reportError('Could not launch the cluster', error);
        return undefined;
      }
    }
  });

  commands.addCommand(CommandIDs.connect, {
    label: 'Connect to Cluster',
    caption: 'Attach to an existing Ray cluster by address',
    execute: async args => {
      const request = args as unknown as IConnectRequest;
      if (!request?.address) {
        show();
        return;
      }
      try {
        const model = await connectCluster({ ...request, kind: 'connect' });
        store.upsert(model);
        return model;
      } catch (error) {
        await reportError('Could not connect to the cluster', error);
        return undefined;
      }
    }
  });

  commands.addCommand(CommandIDs.shutdown, {
    label: args =>
      label(args, cluster(args)?.kind === 'connect' ? 'Detach' : 'Shut Down'),
    isEnabled: args => !!cluster(args) && !store.isBusy(idOf(args)),
    execute: async args => {
      const c = cluster(args);
      if (!c) {
        return;
      }
      const launched = c.kind !== 'connect';
      const verb = launched ? 'Shut down' : 'Detach';
      const result = await showDialog({
        title: `${verb} ${c.name}?`,
        body:
          c.kind === 'found'
            ? 'The EugoHPC Manager did not start this cluster: someone may be using it. Its processes on this machine stop.'
            : launched
              ? (c.facts?.stop_effect ??
                'Every Ray process of this cluster stops; running tasks and objects in its store are lost.')
              : 'The cluster keeps running; this server and new kernels stop using it.',
        buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: verb })]
      });
      if (!result.button.accept) {
        return;
      }
      await guarded(
        c.id,
        `Could not ${verb.toLowerCase()} ${c.name}`,
        async () => {
          await shutdownCluster(c.id, c.kind === 'found');
          store.remove(c.id);
        }
      );
    }
  });

  commands.addCommand(CommandIDs.addNode, {
    label: args => label(args, 'Add Node to'),
    caption:
      'Submit one more worker job; the node joins when the scheduler starts it',
    isEnabled: args =>
      cluster(args)?.status === 'running' && !store.isBusy(idOf(args)),
    execute: async args => {
      const id = idOf(args);
      const model = await guarded(id, 'Could not add a node', () =>
        addNode(id)
      );
      if (model) {
        store.upsert(model);
      }
    }
  });

  commands.addCommand(CommandIDs.removeNode, {
    label: args => `Remove Node ${String(args?.node ?? '')}`,
    caption: 'Cancel this worker job; its Ray node leaves the cluster',
    isEnabled: args => !!cluster(args) && !store.isBusy(idOf(args)),
    execute: async args => {
      const id = idOf(args);
      const node = String(args?.node ?? '');
      const model = await guarded(id, `Could not remove node ${node}`, () =>
        removeNode(id, node)
      );
      if (model) {
        store.upsert(model);
      }
    }
  });

  commands.addCommand(CommandIDs.activate, {
    label: args => label(args, 'Make Active'),
    caption:
      'New kernels (and `import eugo_jupyter`) use this cluster without code',
    isEnabled: args => !!cluster(args) && !store.isBusy(idOf(args)),
    execute: async args => {
      const id = idOf(args);
      const model = await guarded(id, 'Could not make the cluster active', () =>
        activateCluster(id)
      );
      if (model) {
        store.upsert(model);
      }
    }
  });

  commands.addCommand(CommandIDs.insertCode, {
    label: args => label(args, 'Insert Connection Code'),
    caption: 'Add a cell that connects the current notebook to this cluster',
    isEnabled: args => !!cluster(args)?.address,
    execute: async args => {
      const c = cluster(args);
      const panel = notebooks?.currentWidget;
      if (!c || !panel) {
        await showErrorMessage(
          'No notebook to insert into',
          'Open a notebook (or click into one) first, then insert the connection code.'
        );
        return;
      }
      const notebook = panel.content;
      if (
        notebook.activeCell &&
        notebook.activeCell.model.sharedModel.getSource().trim()
      ) {
        NotebookActions.insertBelow(notebook);
      }
      const cell = notebook.activeCell;
      if (cell) {
        cell.model.sharedModel.setSource(connectionCode(c));
      }
      app.shell.activateById(panel.id);
    }
  });

  commands.addCommand(CommandIDs.openDashboard, {
    label: args => label(args, 'Open Ray Dashboard'),
    isEnabled: args => !!(cluster(args) && dashboardHref(cluster(args)!)),
    execute: args => {
      const c = cluster(args);
      const href = c && dashboardHref(c);
      if (href) {
        window.open(href, '_blank', 'noopener');
      }
    }
  });
}
