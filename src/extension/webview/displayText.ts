/** The pages' door to displayText (the webview bundles import nothing from src/core directly): their text is escaped exactly as the extension's. */
export { displayText } from '../../core/model/displayText';
