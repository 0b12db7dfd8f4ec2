// Wiring: the EugoHPC Manager sidebar, the live panes, their commands, palette entries and layout
// restoration.
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';

import { addCommands, CommandIDs } from './commands';
import { addLiveCommands } from './live/commands';
import { ClusterStore } from './model';
import { ClusterSidebar, SIDEBAR_ID } from './panel/sidebar';

const PALETTE_CATEGORY = 'EugoHPC';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'eugo_jupyter:manager',
  description:
    'A left sidebar that launches, monitors and shuts down Ray clusters.',
  autoStart: true,
  optional: [ILayoutRestorer, ICommandPalette, INotebookTracker],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    notebooks: INotebookTracker | null
  ): void => {
    // Nothing here awaits the server: the first poll starts in the background, so a slow or
    // missing server extension never holds up JupyterLab's start.
    const store = new ClusterStore();
    const sidebar = new ClusterSidebar(store, app.commands);
    app.shell.add(sidebar, 'left', { rank: 750 });
    restorer?.add(sidebar, SIDEBAR_ID);

    addCommands({
      app,
      store,
      notebooks,
      show: () => app.shell.activateById(sidebar.id)
    });
    for (const command of [
      CommandIDs.open,
      CommandIDs.launch,
      CommandIDs.connect
    ]) {
      palette?.addItem({ command, category: PALETTE_CATEGORY });
    }
    addLiveCommands(app, store, restorer, palette, PALETTE_CATEGORY);
    store.changed.connect(() => app.commands.notifyCommandChanged());
    store.start();
  }
};

export default plugin;
